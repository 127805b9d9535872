package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.options.StartMode;
import io.onceflow.sink.postgres.options.PostgresTableOptions;
import static io.onceflow.sink.postgres.PostgresTwoPhaseCommitTest.checkpoint;
import static io.onceflow.sink.postgres.PostgresTwoPhaseCommitTest.commit;
import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.PostgresCommittable;
import io.onceflow.sink.postgres.internal.PostgresWriterState;
import io.onceflow.sink.postgres.internal.TransactionId;
import io.onceflow.sink.postgres.internal.PostgresExactlyOnceWriter;
import io.onceflow.sink.postgres.internal.WriterStart;
import io.onceflow.testing.RecordingCommitRequest;
import io.onceflow.testing.RecordingCommitRequest.Outcome;
import io.onceflow.testing.TestPostgres;
import java.nio.file.Path;
import java.sql.SQLException;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A PostgreSQL failover to a copy of the database that is behind (an asynchronous replica promoted
 * while behind, or a file-level copy put back): the copy is taken with the server stopped, the sink
 * goes on through checkpoints on the original, and then the copy takes the original's place. The
 * copy keeps the original's system identifier and timeline; what changes is that its
 * transaction-id counter went back, behind the run and the restored checkpoint's horizon (a real
 * promotion would also grow the timeline, which this test does not simulate).
 *
 * <p>The writer state of each checkpoint is captured as Flink would restore it ({@link
 * PostgresWriterState}); the committables restored with checkpoint 3 are those pending when it was
 * taken (its own).
 */
class StaleCopyFailoverTest {
    private static final String PREFIX = "job";

    @TempDir
    Path directory;
    private int attempts;

    /** What the original server went through after the copy, as Flink remembers it. */
    private record AfterCopy(PostgresSinkConfig config, PostgresCommittable restoredCommittable,
            PostgresWriterState restoredState, TransactionId committedAfterCopy) {}

    @Test
    void aRunRegisteredAfterTheCopyIsAdoptedTheReappearedTransactionCommittedAndTheLostOneReported() throws Exception {
        // the job is resubmitted from checkpoint 1 on the original: a run the copy never sees
        AfterCopy after = copyThenGoOn(true);

        try (TestPostgres failedOver = TestPostgres.start(copy())) {
            PostgresSinkConfig config = onServer(failedOver, after.config());
            assertThat(failedOver.rows("SELECT count(*) FROM " + PostgresTableOptions.DEFAULT_RUNS + " WHERE run = "
                    + config.run())).as("the copy lost the run").containsExactly("0");
            restoreCheckpoint3AndGoOn(failedOver, config, after);

            // a later submission is not refused, and is newer than the adopted run
            PostgresSinkConfig next = SinkDatabase.newRun(config);
            assertThat(next.run()).isGreaterThan(config.run());
            try (PostgresExactlyOnceWriter writer = writer(next, OptionalLong.empty())) {
                commit(next, checkpoint(writer, 1, "f"));
            }
            assertThat(SinkDatabase.deliveries(failedOver)).containsEntry("f", 1);
        }
    }

    @Test
    void aCopyBehindTheRestoredCheckpointCommitsTheReappearedTransactionAndReportsTheLostOne() throws Exception {
        // the same run goes on (a Flink restart from checkpoint 1): the copy knows the run
        AfterCopy after = copyThenGoOn(false);

        try (TestPostgres failedOver = TestPostgres.start(copy())) {
            restoreCheckpoint3AndGoOn(failedOver, onServer(failedOver, after.config()), after);
        }
    }

    private Path copy() {
        return directory.resolve("copy");
    }

    /**
     * Prepares checkpoint 1 on a new server, copies its stopped data directory ({@link #copy()}), and
     * goes on after the copy on the original ({@link #goOnAfterTheCopy}).
     */
    private AfterCopy copyThenGoOn(boolean resubmitted) throws Exception {
        Path live = directory.resolve("live");
        PostgresCommittable preparedBeforeCopy = prepareCheckpoint1(live);
        TestPostgres.copyDataDirectory(live, copy());
        return goOnAfterTheCopy(live, preparedBeforeCopy, resubmitted);
    }

    /** On a new server in {@code live}: registers a run and prepares checkpoint 1 ("a", "b"), to complete later. */
    private PostgresCommittable prepareCheckpoint1(Path live) throws Exception {
        try (TestPostgres server = TestPostgres.start(live)) {
            PostgresSinkConfig config = SinkDatabase.config(builder(server));
            try (PostgresExactlyOnceWriter writer = writer(config, OptionalLong.empty())) {
                return checkpoint(writer, 1, "a", "b");
            }
        }
    }

    /**
     * On the original, after the copy: restores checkpoint 1 (a new run if {@code resubmitted}),
     * commits its transaction (prepared before the copy, committed after), and takes checkpoints 2
     * and 3, both committed.
     */
    private AfterCopy goOnAfterTheCopy(Path live, PostgresCommittable checkpoint1, boolean resubmitted)
            throws Exception {
        try (TestPostgres server = TestPostgres.start(live)) {
            // a busy primary: other clients' transactions, which the copy will never have seen
            server.execute("DO $$ BEGIN FOR i IN 1..1000 LOOP PERFORM pg_current_xact_id(); COMMIT; END LOOP; END $$");
            PostgresSinkConfig config = resubmitted
                    ? new PostgresRunRegistry(builder(server).build().config()).startRun(1, StartMode.RESTORE, "test job")
                            .config()
                    : onServer(server, runOf(server));
            PostgresCommittable checkpoint3;
            PostgresWriterState state3;
            try (PostgresExactlyOnceWriter writer = writer(config, OptionalLong.of(1))) {
                assertThat(commit(config, checkpoint1)).extracting(r -> r.outcome).containsExactly(Outcome.COMMITTED);
                commit(config, checkpoint(writer, 2, "c"));
                writer.write(SinkDatabase.event("d"), null);
                checkpoint3 = writer.prepareCommit().iterator().next();
                state3 = writer.snapshotState(3).get(0);
                commit(config, checkpoint3);
            }
            assertThat(SinkDatabase.deliveries(server)).containsOnlyKeys("a", "b", "c", "d");
            return new AfterCopy(config, checkpoint3, state3, checkpoint1.transactionId());
        }
    }

    /**
     * Restores checkpoint 3 on the copy, as Flink does after the failover: the committer gets
     * checkpoint 3's committable, the writer its state; then one more checkpoint.
     */
    private void restoreCheckpoint3AndGoOn(TestPostgres failedOver, PostgresSinkConfig config, AfterCopy after)
            throws Exception {
        assertThat(prepared(failedOver)).as("the commit of checkpoint 1 was lost with the copy: prepared again")
                .containsExactly(after.committedAfterCopy().encode());
        PostgresSinkMetrics metrics = PostgresSinkMetrics.unregistered();

        // (b) checkpoint 3's PREPARE never reached the copy: reported, counted, and the job runs on
        List<RecordingCommitRequest<PostgresCommittable>> restored =
                commit(config, metrics, after.restoredCommittable());
        assertThat(restored).extracting(r -> r.outcome).containsExactly(Outcome.FAILED);
        assertThat(restored.get(0).failure).hasMessageContaining("LOST: prepared transaction "
                + after.restoredCommittable().transactionId())
                .hasMessageContaining("the PostgreSQL server changed since the run was registered")
                .hasMessageContaining("writer subtask 0 wrote for checkpoint 3 are missing")
                .hasMessageContaining("Replay that checkpoint's input")
                .hasMessageContaining("The point to restore from: the newest retained checkpoint of Flink job"
                        + " test-job-id (or a savepoint of it) with an id below 3");
        assertThat(metrics.transactionsLost.getCount()).isEqualTo(1);

        // (a) and (c): the writer starts (its run may be unknown to the copy) and commits checkpoint 1
        try (PostgresExactlyOnceWriter writer = new PostgresExactlyOnceWriter(config, new WriterStart(0, 1, 128,
                ++attempts, "test-job-id", OptionalLong.of(3), List.of(after.restoredState())), metrics)) {
            PostgresCommittable fourth = checkpoint(writer, 4, "e"); // its first barrier: it reconciles there
            assertThat(prepared(failedOver)).as("checkpoint 1's transaction committed by the reconciliation")
                    .containsExactly(fourth.transactionId().encode());
            assertThat(metrics.serverChangesSeen.getCount()).isEqualTo(1);
            assertThat(metrics.transactionsCommittedOnRecovery.getCount()).isEqualTo(1);
            commit(config, fourth);
        }
        assertThat(SinkDatabase.deliveries(failedOver)).as("checkpoint 1 once; 2 and 3 lost with the copy (3 reported)")
                .isEqualTo(Map.of("a", 1, "b", 1, "e", 1));
    }

    static PostgresSinkBuilder builder(TestPostgres server) {
        return SinkDatabase.builder(server, PREFIX);
    }

    /** The same job (the run of {@code config}) pointed at {@code server}: its URL moved with the failover. */
    static PostgresSinkConfig onServer(TestPostgres server, PostgresSinkConfig config) {
        return builder(server).build().config().withRun(config.run());
    }

    /** A config carrying the newest run registered on {@code server}. */
    private static PostgresSinkConfig runOf(TestPostgres server) {
        long run = Long.parseLong(server.rows("SELECT max(run) FROM " + PostgresTableOptions.DEFAULT_RUNS).get(0));
        return builder(server).build().config().withRun(run);
    }

    private PostgresExactlyOnceWriter writer(PostgresSinkConfig config, OptionalLong restored) throws Exception {
        return SinkDatabase.writer(config, ++attempts, restored);
    }

    private static List<String> prepared(TestPostgres server) throws SQLException {
        return server.rows("SELECT gid FROM pg_prepared_xacts WHERE gid LIKE '" + TransactionId.gidPrefix(PREFIX)
                + "%'");
    }
}
