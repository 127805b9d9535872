package io.onceflow.tools.bench;

import io.onceflow.api.Event;
import io.onceflow.dedup.DeduplicateByMessageId;
import io.onceflow.dedup.MessageIdKey;
import io.onceflow.dedup.MessageIdKeyTypeInfo;
import io.onceflow.dedup.PreloadedDedupState;
import io.onceflow.job.OnceflowPipeline;
import io.onceflow.testing.Eventually;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.PipelineOptions;
import org.apache.flink.configuration.StateRecoveryOptions;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.connector.datagen.source.GeneratorFunction;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.state.rocksdb.RocksDBOptions;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.streaming.util.TestStreamEnvironment;

/**
 * Fills the dedup state with N random UUID ids, fast, and leaves it in a native-format savepoint that
 * the job resumes from (claimed, so its first checkpoint stays incremental): running N records
 * through Kafka and both sinks would take longer than the rest of the benchmark. Two steps, each
 * timed: the State Processor API writes a canonical savepoint with the ids
 * ({@link PreloadedDedupState}); a small job with the job's keying and dedup operator (same uid,
 * same TTL) restores it, waits until RocksDB's compactions have settled and stops with a native
 * savepoint. A trickle source keeps that job running until it is stopped.
 */
final class StatePreloader {
    /** Different from the generator's seeds, so preloaded ids never meet the input's. */
    private static final long ID_SEED = 0x5eed_0f_1d5L;
    /** No RocksDB file written or removed for this long: the restore's compactions are done. */
    static final Duration COMPACTION_SETTLED = Duration.ofSeconds(15);

    private final MiniCluster cluster;
    private final int parallelism;
    private final Duration compactionSettled;

    /** @param compactionSettled how long RocksDB must write and remove no file before the savepoint */
    StatePreloader(MiniCluster cluster, int parallelism, Duration compactionSettled) {
        this.cluster = cluster;
        this.parallelism = parallelism;
        this.compactionSettled = compactionSettled;
    }

    /** The {@code i}-th preloaded id. */
    static String preloadedId(long i) {
        return PreloadedDedupState.id(ID_SEED, i).toString();
    }

    /**
     * @param flink the configuration of the job that will resume (state backend, checkpoints)
     * @return the path of a native-format savepoint with {@code ids} ids in the dedup state
     */
    String preload(long ids, Duration dedupTtl, Configuration flink, String savepointDirectory) throws Exception {
        long start = System.nanoTime();
        String canonical = savepointDirectory.replaceAll("/*$", "") + "/preloaded-canonical";
        Configuration bootstrapping = new Configuration(flink);
        // the job disables generic types; the State Processor API's own output (TaggedOperatorSubtaskState) is one
        bootstrapping.set(PipelineOptions.GENERIC_TYPES, true);
        StreamExecutionEnvironment bootstrap =
                new TestStreamEnvironment(cluster, bootstrapping, parallelism, List.of(), List.of());
        PreloadedDedupState.bootstrap(bootstrap, OnceflowPipeline.DEDUP_UID, ids, ID_SEED, dedupTtl, parallelism, canonical);
        bootstrap.execute("bench preload " + ids + ": bootstrap");
        double bootstrapSeconds = (System.nanoTime() - start) / 1e9;

        Configuration restoring = new Configuration(flink);
        restoring.set(StateRecoveryOptions.SAVEPOINT_PATH, canonical);
        Path rocksDbDirectory = Files.createTempDirectory("onceflow-preload-rocksdb");
        restoring.set(RocksDBOptions.LOCAL_DIRECTORIES, rocksDbDirectory.toString());
        StreamExecutionEnvironment env = new TestStreamEnvironment(cluster, restoring, parallelism, List.of(), List.of());
        env.fromSource(new DataGeneratorSource<>(new KeepAliveEvent(), Long.MAX_VALUE,
                                RateLimiterStrategy.perSecond(1), TypeInformation.of(Event.class)),
                        WatermarkStrategy.noWatermarks(), "Keep alive")
                .uid("preload-keep-alive")
                .keyBy(new MessageIdKey.Selector(), MessageIdKeyTypeInfo.INSTANCE)
                .process(new DeduplicateByMessageId(dedupTtl), TypeInformation.of(Event.class))
                .uid(OnceflowPipeline.DEDUP_UID)
                .sinkTo(new DiscardingSink<>())
                .uid("preload-discard");
        JobClient job = env.executeAsync("bench preload " + ids + ": native savepoint");
        // restoring N ids into RocksDB happens before the tasks run: allow 10 minutes per 100M
        Duration restoreTimeout = Duration.ofMinutes(Math.max(5, ids / 10_000_000));
        JobScenario.await(restoreTimeout, () -> JobScenario.allTasksRunning(cluster, job), "the preloaded state restored", job);
        double restoredSeconds = (System.nanoTime() - start) / 1e9;
        JobScenario.await(restoreTimeout, new FilesUnchanged(rocksDbDirectory, compactionSettled),
                "RocksDB's compactions after the restore settled", job);
        double settledSeconds = (System.nanoTime() - start) / 1e9;
        String savepoint = cluster.stopWithSavepoint(
                job.getJobID(), savepointDirectory, false, SavepointFormatType.NATIVE).get();
        double totalSeconds = (System.nanoTime() - start) / 1e9;
        Benchmark.deleteRecursively(rocksDbDirectory);
        Benchmark.say(String.format("preloaded %,d ids into dedup state in %.0f s (State Processor API bootstrap %.0f s, "
                        + "restore %.0f s, compactions %.0f s, native savepoint %.0f s): %s", ids, totalSeconds,
                bootstrapSeconds, restoredSeconds - bootstrapSeconds, settledSeconds - restoredSeconds,
                totalSeconds - settledSeconds, savepoint));
        return savepoint;
    }

    /**
     * Holds once the files under a directory (names and sizes) have not changed for {@code quiet}:
     * RocksDB has finished the compactions that a restore's freshly written files set off, so that
     * the state scenario does not measure them. (They were not what made restored state slow: that
     * was whole-file filter blocks too big to stay in the block cache, fixed by partitioned filters
     * in flink-conf/config.yaml; docs/benchmarks.md, "Preloading with the State Processor API".)
     */
    private static final class FilesUnchanged implements Eventually.Condition<Exception> {
        private final Path directory;
        private final Duration quiet;
        private Map<String, Long> lastSeen = Map.of();
        private long unchangedSince = System.nanoTime();

        FilesUnchanged(Path directory, Duration quiet) {
            this.directory = directory;
            this.quiet = quiet;
        }

        @Override
        public boolean holds() throws IOException {
            Map<String, Long> files = new HashMap<>();
            boolean anyInstance = false;
            try (Stream<Path> paths = Files.walk(directory)) {
                for (Path path : paths.filter(p -> !p.toString().contains("/chk-")).toList()) {
                    // a checkpoint's local chk-N copies come and go every interval; an instance has a CURRENT file
                    anyInstance |= path.getFileName().toString().equals("CURRENT");
                    if (!path.toString().endsWith(".sst")) {
                        continue;
                    }
                    try {
                        files.put(path.toString(), Files.size(path));
                    } catch (NoSuchFileException deletedMeanwhile) {
                        // a compaction removed it: the next poll sees the change
                    }
                }
            } catch (UncheckedIOException directoryRemovedDuringTheWalk) {
                unchangedSince = System.nanoTime();
                return false;
            }
            if (!anyInstance) {
                throw new IllegalStateException("no RocksDB instance under " + directory
                        + ": the restored job does not keep its state there");
            }
            if (!files.equals(lastSeen)) {
                lastSeen = files;
                unchangedSince = System.nanoTime();
                return false;
            }
            return System.nanoTime() - unchangedSince >= quiet.toNanos();
        }
    }

    /** Always the same id, so the trickle adds one entry to the state. */
    private static final class KeepAliveEvent implements GeneratorFunction<Long, Event> {
        private static final long serialVersionUID = 1L;

        @Override
        public Event map(Long i) {
            return new Event("preload-keep-alive", new byte[0], "preload", 0, i, 0L, new HashMap<>());
        }
    }
}
