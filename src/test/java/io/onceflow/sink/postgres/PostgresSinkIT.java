package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.options.StartMode;
import io.onceflow.sink.postgres.options.PostgresTableOptions;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.onceflow.api.Event;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.options.PostgresWriterOptions;
import io.onceflow.sink.postgres.internal.ProtocolHooks.Step;
import io.onceflow.sink.postgres.internal.ProtocolHooks;
import io.onceflow.sink.postgres.internal.TransactionId;
import io.onceflow.testing.Eventually;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Predicate;
import java.util.stream.Collectors;
import java.util.stream.LongStream;
import java.util.stream.Stream;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.ExternalizedCheckpointRetention;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.configuration.StateRecoveryOptions;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.testutils.MiniClusterResourceConfiguration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * {@link PostgresSink} in real Flink jobs (MiniCluster) against a real PostgreSQL server, with
 * failures injected at each step of the two-phase protocol, and rescaling across failures and
 * savepoints. The oracle is per message id: each produced id exactly once, delivered once, and no
 * prepared transaction of the sink left behind.
 */
class PostgresSinkIT {
    private static final int EVENTS = 2_000;
    private static final String PREFIX = "it";

    @RegisterExtension
    static final MiniClusterExtension FLINK = new MiniClusterExtension(new MiniClusterResourceConfiguration.Builder()
            .setNumberTaskManagers(1)
            .setNumberSlotsPerTaskManager(4)
            .build());

    @TempDir
    Path checkpoints;

    private final SinkDatabase db = new SinkDatabase();
    /** What the sinks of the next jobs do at each protocol step; null for nothing. */
    private InJvmHook hook;
    /** The writer lease of the next jobs' sinks. */
    private Duration writerLease = PostgresWriterOptions.DEFAULT_WRITER_LEASE;
    /** How many failures the hooks injected. */
    private final AtomicInteger injected = new AtomicInteger();
    /** Transactions that were prepared when an injected failure hit, and must never be committed. */
    private final List<TransactionId> abandoned = new CopyOnWriteArrayList<>();

    @BeforeEach
    void createTables() throws SQLException {
        db.builder(PREFIX).build().startRun(3, StartMode.FRESH, "create the tables");
    }

    @AfterEach
    void forgetHook() {
        hookWith(null);
    }

    private void hookWith(ProtocolHooks.Hook newHook) {
        if (hook != null) {
            hook.forget();
        }
        hook = newHook == null ? null : InJvmHook.of(newHook);
    }

    @ParameterizedTest
    @EnumSource(Step.class)
    void aFailureAtAnyStepOfTheProtocolChangesNothing(Step step) throws Exception {
        // the fence's steps carry checkpoint 0: they fail the first time; a short lease renews while the job runs
        hookWith(failOnce(step, transaction -> transaction.checkpointId() >= 3 || transaction.checkpointId() == 0));
        writerLease = Duration.ofSeconds(1);

        run(job(2, EVENTS, null).withRestarts());

        assertThat(injected).as("failures injected at " + step).hasValue(1);
        assertEveryIdExactlyOnce(EVENTS);
        switch (step) {
            case BEFORE_PREPARE:
                assertThat(abandoned).isEmpty(); // it failed before preparing
                break;
            case AFTER_PREPARE:
                assertThat(abandoned).hasSize(1);
                assertNeverCommitted(abandoned);
                break;
            default: // the checkpoint had completed: the restored committable gets (or got) committed
                assertThat(abandoned).isEmpty();
        }
    }

    @Test
    void anEarlyCommitIsCaught() throws Exception {
        // The stock XA sink's defect: commit in prepareCommit, before the checkpoint completes.
        AtomicInteger prepared = new AtomicInteger();
        hookWith((step, transaction) -> {
            if (step == Step.AFTER_PREPARE) {
                db.execute("COMMIT PREPARED '" + transaction.encode() + "'");
                if (prepared.incrementAndGet() == 4) {
                    throw new IOException("injected failure after an early commit");
                }
            }
        });

        run(job(2, EVENTS, null).withRestarts());

        assertThatThrownBy(() -> assertEveryIdExactlyOnce(EVENTS))
                .isInstanceOf(AssertionError.class)
                .hasMessageContaining("deliveries");
    }

    @Test
    void rescalingTwoToThreeToOneAcrossCrashesWithOrphansLeftBehind() throws Exception {
        // parallelism 2: subtask 1 crashes after preparing; no restart, so its transaction stays prepared
        hookWith(failOnce(Step.AFTER_PREPARE, t -> t.subtaskIndex() == 1 && t.checkpointId() >= 3));
        Job first = job(2, EVENTS, null);
        assertThatThrownBy(() -> run(first)).hasStackTraceContaining("injected failure");
        List<TransactionId> orphansOfTwo = db.prepared(PREFIX);
        assertThat(orphansOfTwo).extracting(TransactionId::subtaskIndex).contains(1);

        // parallelism 3, from the last checkpoint: the orphans go; subtask 2 crashes the same way,
        // a few checkpoints later (ids go on from the restored one), so that this job has its own
        hookWith(failOnce(Step.AFTER_PREPARE, t -> t.subtaskIndex() == 2 && t.checkpointId() >= 6));
        Job second = job(3, EVENTS, latestCheckpoint(first));
        assertThatThrownBy(() -> run(second)).hasStackTraceContaining("injected failure");
        assertThat(db.prepared(PREFIX)).doesNotContainAnyElementsOf(orphansOfTwo);
        assertNeverCommitted(orphansOfTwo);
        List<TransactionId> orphansOfThree = db.prepared(PREFIX);
        assertThat(orphansOfThree).extracting(TransactionId::subtaskIndex).contains(2);

        // parallelism 1: subtask 0 must clean up old index 2 too
        hookWith(null);
        run(job(1, EVENTS, latestCheckpoint(second)));

        assertEveryIdExactlyOnce(EVENTS);
        assertNeverCommitted(orphansOfThree);
    }

    @Test
    void stopWithSavepointAndResumeWithMoreSubtasks() throws Exception {
        Job first = job(2, EVENTS, null);
        JobClient client = first.start();
        Eventually.await("condition not met within 60 s", Duration.ofSeconds(60), Duration.ofMillis(50),
                () -> db.deliveriesById().size() > EVENTS / 4);
        String savepoint = client.stopWithSavepoint(false, checkpoints.resolve("savepoints").toUri().toString(),
                SavepointFormatType.CANONICAL).get(60, TimeUnit.SECONDS);
        int committedAtSavepoint = db.deliveriesById().size();
        assertThat(committedAtSavepoint).isBetween(1, EVENTS - 1);
        assertThat(db.prepared(PREFIX)).as("the savepoint's transactions are committed on stop").isEmpty();

        run(job(3, EVENTS, savepoint));

        assertEveryIdExactlyOnce(EVENTS);
    }

    // ----------------------------------------------------------------------------------------

    /** Fails the first time {@code step} is reached for a transaction matching {@code when}. */
    private ProtocolHooks.Hook failOnce(Step step, Predicate<TransactionId> when) {
        AtomicInteger failures = new AtomicInteger();
        return (reached, transaction) -> {
            if (reached == step && when.test(transaction) && failures.getAndIncrement() == 0) {
                if (step == Step.AFTER_PREPARE) {
                    abandoned.add(transaction);
                }
                injected.incrementAndGet();
                throw new IOException("injected failure at " + step + " of " + transaction);
            }
        };
    }

    private Job job(int parallelism, int events, String restoreFrom) {
        return new Job(parallelism, events, restoreFrom);
    }

    /** One job: events id-0 .. id-(events-1) at about 100 per checkpoint, keyed, into the sink. */
    private final class Job {
        final Configuration config = new Configuration();
        final int parallelism;
        final int events;
        JobClient client;

        Job(int parallelism, int events, String restoreFrom) {
            this.parallelism = parallelism;
            this.events = events;
            config.set(CheckpointingOptions.CHECKPOINTING_INTERVAL, Duration.ofMillis(100));
            config.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, checkpoints.toUri().toString());
            config.set(CheckpointingOptions.EXTERNALIZED_CHECKPOINT_RETENTION,
                    ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION);
            config.set(RestartStrategyOptions.RESTART_STRATEGY, "none");
            if (restoreFrom != null) {
                config.set(StateRecoveryOptions.SAVEPOINT_PATH, restoreFrom);
            }
        }

        Job withRestarts() {
            config.set(RestartStrategyOptions.RESTART_STRATEGY, "fixed-delay");
            config.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_ATTEMPTS, 3);
            config.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_DELAY, Duration.ofMillis(100));
            return this;
        }

        JobClient start() throws Exception {
            StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(config);
            env.setParallelism(parallelism);
            DataGeneratorSource<Event> source = new DataGeneratorSource<>(
                    n -> SinkDatabase.event("id-" + n), events, RateLimiterStrategy.perCheckpoint(100),
                    TypeInformation.of(Event.class));
            env.fromSource(source, WatermarkStrategy.noWatermarks(), "events")
                    .uid("events")
                    .keyBy(event -> event.messageId, TypeInformation.of(String.class))
                    .sinkTo(startedSink(config.getOptional(StateRecoveryOptions.SAVEPOINT_PATH).isPresent()))
                    .uid("postgres");
            client = env.executeAsync("postgres sink it");
            return client;
        }
    }

    /** Each job submission is a run of the sink, as OnceflowJob makes it. */
    private PostgresSink startedSink(boolean restoring) throws SQLException {
        PostgresSinkConfig run = db.builder(PREFIX).setBatchSize(30).setWriterLease(writerLease).build()
                .startRun(4, restoring ? StartMode.RESTORE : StartMode.FRESH_DISCARDING_PENDING, "postgres sink it")
                .config();
        return new PostgresSink(hook == null ? run : run.withHook(hook));
    }

    private static void run(Job job) throws Exception {
        job.start().getJobExecutionResult().get(90, TimeUnit.SECONDS);
    }

    private String latestCheckpoint(Job job) throws IOException {
        Path jobDirectory = checkpoints.resolve(job.client.getJobID().toString());
        try (Stream<Path> children = Files.list(jobDirectory)) {
            return children
                    .filter(path -> path.getFileName().toString().startsWith("chk-"))
                    .filter(path -> Files.exists(path.resolve("_metadata")))
                    .max(Comparator.comparingLong(path -> Long.parseLong(path.getFileName().toString().substring(4))))
                    .orElseThrow(() -> new AssertionError("no completed checkpoint in " + jobDirectory))
                    .toUri()
                    .toString();
        }
    }

    private void assertEveryIdExactlyOnce(int events) throws SQLException {
        Set<String> produced = LongStream.range(0, events).mapToObj(n -> "id-" + n).collect(Collectors.toSet());
        Map<String, Integer> deliveries = db.deliveriesById();
        Set<String> missing = new HashSet<>(produced);
        missing.removeAll(deliveries.keySet());
        Set<String> unexpected = new HashSet<>(deliveries.keySet());
        unexpected.removeAll(produced);
        Map<String, Integer> redelivered = deliveries.entrySet().stream()
                .filter(entry -> entry.getValue() != 1)
                .collect(Collectors.toMap(Map.Entry::getKey, Map.Entry::getValue));
        assertThat(missing).as("produced ids without a row").isEmpty();
        assertThat(unexpected).as("rows of ids never produced").isEmpty();
        assertThat(redelivered).as("ids with deliveries != 1").isEmpty();
        assertThat(db.prepared(PREFIX)).as("prepared transactions left behind").isEmpty();
    }

    private void assertNeverCommitted(List<TransactionId> transactions) throws SQLException {
        Set<String> logged = new HashSet<>();
        db.query("SELECT gid FROM " + PostgresTableOptions.DEFAULT_COMMIT_LOG, row -> logged.add(row.getString(1)));
        assertThat(transactions).extracting(TransactionId::encode).doesNotContainAnyElementsOf(logged);
    }
}
