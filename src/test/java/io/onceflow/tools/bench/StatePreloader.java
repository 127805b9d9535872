package io.onceflow.tools.bench;

import io.onceflow.dedup.DeduplicateByMessageId;
import io.onceflow.dedup.MessageIdKey;
import io.onceflow.dedup.MessageIdKeyTypeInfo;
import io.onceflow.ingest.Event;
import io.onceflow.job.OnceflowPipeline;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.SplittableRandom;
import java.util.UUID;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.connector.datagen.source.GeneratorFunction;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.execution.ExecutionState;
import org.apache.flink.runtime.executiongraph.AccessExecutionJobVertex;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.streaming.util.TestStreamEnvironment;

/**
 * Fills the dedup state with N random UUID ids, fast, and leaves it in a savepoint that the job
 * resumes from: running N records through Kafka and both sinks would take longer than the rest of
 * the benchmark. The filling job has the job's keying and dedup operator (same uid, same TTL), fed
 * from a number sequence; a trickle source keeps it running after the sequence ends, so that it can
 * be stopped with a savepoint holding every id.
 */
final class StatePreloader {
    private static final String SEQUENCE_NAME = "Preloaded ids";
    /** Different from the generator's seeds, so preloaded ids never meet the input's. */
    private static final long ID_SEED = 0x5eed_0f_1d5L;
    private static final long MIN_IDS_PER_SECOND = 20_000;

    private final MiniCluster cluster;
    private final int parallelism;

    StatePreloader(MiniCluster cluster, int parallelism) {
        this.cluster = cluster;
        this.parallelism = parallelism;
    }

    /**
     * @param flink the configuration of the job that will resume (state backend, checkpoints)
     * @return the path of a native-format savepoint with {@code ids} ids in the dedup state
     */
    String preload(long ids, Duration dedupTtl, Configuration flink, String savepointDirectory) throws Exception {
        StreamExecutionEnvironment env = new TestStreamEnvironment(cluster, flink, parallelism, List.of(), List.of());
        DataStream<Event> preloaded = env.fromSequence(0, ids - 1).name(SEQUENCE_NAME).uid("preload-sequence")
                .map(new RandomIdEvent(), TypeInformation.of(Event.class)).uid("preload-events");
        DataStream<Event> keepAlive = env.fromSource(
                        new DataGeneratorSource<>(new KeepAliveEvent(), Long.MAX_VALUE,
                                RateLimiterStrategy.perSecond(1), TypeInformation.of(Event.class)),
                        WatermarkStrategy.noWatermarks(), "Keep alive")
                .uid("preload-keep-alive");
        preloaded.union(keepAlive)
                .keyBy(new MessageIdKey.Selector(), MessageIdKeyTypeInfo.INSTANCE)
                .process(new DeduplicateByMessageId(dedupTtl), TypeInformation.of(Event.class))
                .uid(OnceflowPipeline.DEDUP_UID)
                .sinkTo(new DiscardingSink<>())
                .uid("preload-discard");

        long start = System.nanoTime();
        JobClient job = env.executeAsync("bench preload " + ids);
        // once the sequence's task has finished, every id is upstream of the next checkpoint barrier
        JobScenario.await(preloadTimeout(ids), () -> sequenceFinished(job), "the preload sequence finished", job);
        String savepoint = cluster.stopWithSavepoint(
                job.getJobID(), savepointDirectory, false, SavepointFormatType.NATIVE).get();
        Benchmark.say(String.format("preloaded %,d ids into dedup state in %.0f s: %s",
                ids, (System.nanoTime() - start) / 1e9, savepoint));
        return savepoint;
    }

    /** 20 minutes, or more for 100M ids and up: at least 20,000 ids/s (about 100,000 measured on 2 cores). */
    private static Duration preloadTimeout(long ids) {
        return Duration.ofSeconds(Math.max(Duration.ofMinutes(20).toSeconds(), ids / MIN_IDS_PER_SECOND));
    }

    private boolean sequenceFinished(JobClient job) throws Exception {
        for (AccessExecutionJobVertex vertex : cluster.getExecutionGraph(job.getJobID()).get().getVerticesTopologically()) {
            if (vertex.getName().contains(SEQUENCE_NAME)) {
                return vertex.getAggregateState() == ExecutionState.FINISHED;
            }
        }
        return false;
    }

    /** Event {@code i} of the preload: a random UUID id, deterministic in {@code i}. */
    private static final class RandomIdEvent implements MapFunction<Long, Event> {
        private static final long serialVersionUID = 1L;

        @Override
        public Event map(Long i) {
            SplittableRandom random = new SplittableRandom(ID_SEED + i);
            String id = new UUID(random.nextLong(), random.nextLong()).toString();
            return new Event(id, new byte[0], "preload", 0, i, 0L, new HashMap<>());
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
