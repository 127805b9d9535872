package io.onceflow.sink.postgres;

import io.onceflow.api.Event;
import io.onceflow.sink.postgres.internal.PostgresConnections;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.PostgresCommittable;
import io.onceflow.sink.postgres.internal.PostgresCommitter;
import io.onceflow.sink.postgres.internal.PreparedTransactionRecovery;
import io.onceflow.sink.postgres.internal.TransactionId;
import io.onceflow.sink.postgres.internal.PostgresAtLeastOnceWriter;
import io.onceflow.sink.postgres.internal.PostgresExactlyOnceWriter;
import io.onceflow.testing.RecordingCommitRequest;
import io.onceflow.testing.RecordingCommitRequest.Outcome;
import io.onceflow.testing.TestPostgres;
import java.io.IOException;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.stream.IntStream;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.junit.jupiter.api.Test;
import static io.onceflow.sink.postgres.SinkDatabase.event;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;
import static org.assertj.core.api.Assertions.assertThatThrownBy;


/**
 * The protocol of {@link PostgresSink} against a real PostgreSQL server, driving writers and
 * committers by hand the way Flink's sink operators do, crashes included.
 */
class PostgresTwoPhaseCommitTest {
    private final SinkDatabase db = new SinkDatabase();
    private final PostgresSinkConfig config = db.config("job");

    private PostgresExactlyOnceWriter freshWriter(PostgresSinkConfig config) throws IOException {
        return db.freshWriter(config);
    }

    private static PostgresCommittable single(Collection<PostgresCommittable> committables) {
        assertThat(committables).hasSize(1);
        return committables.iterator().next();
    }

    /** Writes {@code ids}, prepares, and tells the writer the checkpoint was taken, as Flink does. */
    static PostgresCommittable checkpoint(PostgresExactlyOnceWriter writer, long checkpointId, String... ids)
            throws Exception {
        return checkpoint(writer, checkpointId, Arrays.stream(ids).map(SinkDatabase::event).toArray(Event[]::new));
    }

    /** As {@link #checkpoint(PostgresExactlyOnceWriter, long, String...)}, with events of the caller's. */
    static PostgresCommittable checkpoint(PostgresExactlyOnceWriter writer, long checkpointId, Event... events)
            throws Exception {
        for (Event event : events) {
            writer.write(event, null);
        }
        PostgresCommittable committable = single(writer.prepareCommit());
        writer.snapshotState(checkpointId);
        return committable;
    }

    /**
     * Writes {@code ids}, ends the input and prepares for the final checkpoint, then tells the writer
     * that checkpoint was taken, as Flink does for a bounded input.
     */
    static PostgresCommittable finalCheckpoint(PostgresExactlyOnceWriter writer, long checkpointId, String... ids)
            throws Exception {
        write(writer, ids);
        writer.flush(true);
        PostgresCommittable committable = single(writer.prepareCommit());
        writer.snapshotState(checkpointId);
        return committable;
    }

    static void write(SinkWriter<Event> writer, String... ids) throws Exception {
        for (String id : ids) {
            writer.write(event(id), null);
        }
    }

    static List<RecordingCommitRequest<PostgresCommittable>> commit(PostgresSinkConfig config,
            PostgresCommittable... committables)
            throws IOException {
        return commit(config, PostgresSinkMetrics.unregistered(), committables);
    }

    /** As {@link #commit(PostgresSinkConfig, PostgresCommittable...)}, counting in {@code metrics}. */
    static List<RecordingCommitRequest<PostgresCommittable>> commit(PostgresSinkConfig config,
            PostgresSinkMetrics metrics, PostgresCommittable... committables) throws IOException {
        List<RecordingCommitRequest<PostgresCommittable>> requests = new ArrayList<>();
        for (PostgresCommittable committable : committables) {
            requests.add(new RecordingCommitRequest<>(committable));
        }
        try (PostgresCommitter committer = new PostgresCommitter(config, metrics, "test-job-id")) {
            committer.commit(new ArrayList<>(requests));
        }
        return requests;
    }

    @Test
    void nothingIsVisibleBeforeTheCommitAndACrashLeavesThePreparedTransaction() throws Exception {
        PostgresExactlyOnceWriter writer = freshWriter(config);
        PostgresCommittable committable = checkpoint(writer, 1, "a", "b", "c");

        writer.close(); // the task dies before the checkpoint completes

        assertThat(db.deliveriesById()).isEmpty();
        assertThat(db.prepared("job")).containsExactly(committable.transactionId());
        assertThat(committable.transactionId().checkpointId()).isEqualTo(1);
        assertThat(committable.transactionId().subtaskIndex()).isZero();

        assertThat(commit(config, committable)).extracting(r -> r.outcome).containsExactly(Outcome.COMMITTED);
        assertThat(db.deliveriesById()).containsOnlyKeys("a", "b", "c");
        assertThat(db.prepared("job")).isEmpty();
    }

    @Test
    void theMetricsCountPreparedTransactionsTheirRowsAndTheCommitLatencyButNotARestoredCommit() throws Exception {
        PostgresSinkMetrics metrics = PostgresSinkMetrics.unregistered();
        PostgresCommittable first;
        PostgresCommittable second;
        try (PostgresExactlyOnceWriter writer = new PostgresExactlyOnceWriter(config, db.attempt(0, 1,
                OptionalLong.empty()), metrics)) {
            first = checkpoint(writer, 1, "a", "b", "c");
            second = checkpoint(writer, 2, "d");
            assertThat(writer.prepareCommit()).as("a checkpoint without rows prepares nothing").isEmpty();
        }

        commit(config, metrics, first, second);
        commit(config, metrics, first); // restored: committed before

        assertThat(metrics.transactionsPrepared.getCount()).isEqualTo(2);
        assertThat(metrics.rowsPerTransaction.getCount()).isEqualTo(2);
        assertThat(metrics.rowsPerTransaction.getStatistics().getMax()).isEqualTo(3);
        assertThat(metrics.rowsPerTransaction.getStatistics().getMin()).isEqualTo(1);
        assertThat(metrics.commitLatencyMs.getCount()).as("one sample per COMMIT PREPARED").isEqualTo(2);
        assertThat(metrics.commitLatencyMs.getStatistics().getMin()).isNotNegative();
    }

    @Test
    void committingTwiceIsFineThanksToTheCommitLog() throws Exception {
        PostgresCommittable committable;
        try (PostgresExactlyOnceWriter writer = freshWriter(config)) {
            committable = checkpoint(writer, 1, "a");
        }

        commit(config, committable);
        List<RecordingCommitRequest<PostgresCommittable>> again = commit(config, committable);

        assertThat(again).extracting(r -> r.outcome).containsExactly(Outcome.ALREADY_COMMITTED);
        assertThat(db.deliveriesById()).containsExactlyEntriesOf(Map.of("a", 1));
    }

    @Test
    void aLostTransactionIsReportedAndCountedAndTheJobRunsOn() throws Exception {
        PostgresCommittable rolledBack;
        try (PostgresExactlyOnceWriter writer = freshWriter(config)) {
            rolledBack = checkpoint(writer, 1, "a");
        }
        db.execute("ROLLBACK PREPARED '" + rolledBack.transactionId().encode() + "'");
        PostgresCommittable neverPrepared = new PostgresCommittable(new TransactionId("job", 1, 0, 7));
        PostgresSinkMetrics metrics = PostgresSinkMetrics.unregistered();

        // no exception: a restart could not bring the rows back, it would only loop
        List<RecordingCommitRequest<PostgresCommittable>> requests = commit(config, metrics, rolledBack, neverPrepared);

        assertThat(requests).extracting(r -> r.outcome).containsExactly(Outcome.FAILED, Outcome.FAILED);
        for (RecordingCommitRequest<PostgresCommittable> request : requests) {
            assertThat(request.failure).hasMessageContaining("LOST: prepared transaction "
                    + request.getCommittable().transactionId()).hasMessageContaining("neither prepared nor in the commit log")
                    .hasMessageContaining("writer subtask 0 wrote for checkpoint "
                            + request.getCommittable().transactionId().checkpointId() + " are missing");
        }
        assertThat(metrics.transactionsLost.getCount()).isEqualTo(2);
    }

    @Test
    void aRestoredWriterRollsBackLaterCheckpointsAndLeavesTheRestToTheCommitter() throws Exception {
        PostgresCommittable first;
        PostgresCommittable second;
        PostgresCommittable third;
        try (PostgresExactlyOnceWriter writer = freshWriter(config)) {
            first = checkpoint(writer, 1, "a");
            second = checkpoint(writer, 2, "b");
            third = checkpoint(writer, 3, "c"); // checkpoint 3 never completes
        }
        assertThat(db.prepared("job")).hasSize(3);

        // Flink restores checkpoint 2: its committer gets `first` and `second` back.
        try (PostgresExactlyOnceWriter restored = db.restoredWriter(config, 2)) {
            assertThat(db.prepared("job")).as("nothing rolled back before the first barrier").hasSize(3);
            PostgresCommittable replay = checkpoint(restored, 3, "c"); // claims, rolls back 3, writes "c" again
            assertThat(db.prepared("job")).containsExactlyInAnyOrder(first.transactionId(), second.transactionId(),
                    replay.transactionId());
            commit(config, first, second);
            assertThat(replay.transactionId().checkpointId()).isEqualTo(3);
            assertThat(replay.transactionId().epoch()).isNotEqualTo(third.transactionId().epoch());
            commit(config, replay);
        }

        assertThat(db.deliveriesById()).containsExactlyInAnyOrderEntriesOf(Map.of("a", 1, "b", 1, "c", 1));
        assertThat(db.prepared("job")).isEmpty();
    }

    @Test
    void aFreshStartRollsBackItsPrefixOnly() throws Exception {
        PostgresSinkConfig job2 = db.config("job2");
        PostgresSinkConfig jo = db.config("jo");
        try (PostgresExactlyOnceWriter writer = freshWriter(config);
                PostgresExactlyOnceWriter writer2 = freshWriter(job2);
                PostgresExactlyOnceWriter writer3 = freshWriter(jo)) {
            checkpoint(writer, 1, "a");
            checkpoint(writer2, 1, "b");
            checkpoint(writer3, 1, "c");
        }

        // restarted before checkpoint 1 completed: it claims and recovers at its first barrier
        try (PostgresExactlyOnceWriter restarted = freshWriter(config)) {
            restarted.snapshotState(2);
        }

        assertThat(db.prepared("job")).isEmpty();
        assertThat(db.prepared("job2")).hasSize(1);
        assertThat(db.prepared("jo")).hasSize(1);
        // ... and a restore of job2 leaves job alone just as well.
        try (PostgresExactlyOnceWriter restored = db.restoredWriter(job2, 0)) {
            restored.snapshotState(2);
        }
        assertThat(db.prepared("job2")).isEmpty();
        assertThat(db.prepared("jo")).hasSize(1);
    }

    @Test
    void gidsStayUniqueWhenCheckpointIdsStartAgain() throws Exception {
        PostgresCommittable firstRun;
        PostgresCommittable secondRun;
        try (PostgresExactlyOnceWriter writer = freshWriter(config)) {
            firstRun = checkpoint(writer, 1, "a");
        }
        commit(config, firstRun);
        try (PostgresExactlyOnceWriter writer = freshWriter(SinkDatabase.newRun(config))) { // resubmitted fresh
            secondRun = checkpoint(writer, 1, "b");
        }

        assertThat(secondRun.transactionId().checkpointId()).isEqualTo(firstRun.transactionId().checkpointId());
        assertThat(secondRun.transactionId()).isNotEqualTo(firstRun.transactionId());
        assertThat(commit(config, secondRun)).extracting(r -> r.outcome).containsExactly(Outcome.COMMITTED);
        assertThat(db.deliveriesById()).containsOnlyKeys("a", "b");
    }

    @Test
    void recoveryCoversEveryOldSubtaskAfterRescaling() throws Exception {
        List<PostgresExactlyOnceWriter> oldWriters = new ArrayList<>();
        for (int subtask = 0; subtask < 3; subtask++) {
            PostgresExactlyOnceWriter writer = SinkDatabase.writer(config, db.attempt(subtask, 3, OptionalLong.of(4)));
            checkpoint(writer, 5, "id-" + subtask);
            oldWriters.add(writer);
        }
        for (PostgresExactlyOnceWriter writer : oldWriters) {
            writer.close();
        }
        assertThat(db.prepared("job")).extracting(TransactionId::subtaskIndex).containsExactlyInAnyOrder(0, 1, 2);

        // 3 -> 2 from a savepoint of checkpoint 4: subtask 1 takes old index 1 only, subtask 0 old indices 0 and 2.
        PostgresSinkConfig upgraded = SinkDatabase.newRun(config);
        SinkDatabase.claimedWriter(upgraded, db.attempt(1, 2, OptionalLong.of(4)), 5).close();
        assertThat(db.prepared("job")).extracting(TransactionId::subtaskIndex).containsExactlyInAnyOrder(0, 2);
        SinkDatabase.claimedWriter(upgraded, db.attempt(0, 2, OptionalLong.of(4)), 5).close();
        assertThat(db.prepared("job")).isEmpty();
    }

    @Test
    void everyOldIndexHasExactlyOneNewSubtaskForAnyParallelism() {
        for (int oldIndex = 0; oldIndex < 8; oldIndex++) {
            for (int p = 1; p <= 5; p++) {
                int parallelism = p;
                int index = oldIndex;
                long owners = IntStream.range(0, parallelism)
                        .filter(subtask -> db.attempt(subtask, parallelism, OptionalLong.of(8)).covers(index))
                        .count();
                assertThat(owners).as("old index %d at parallelism %d", oldIndex, parallelism).isEqualTo(1);
            }
        }
    }

    @Test
    void abandonedMeansAFreshStartALaterCheckpointOrAWriterStartedAfterTheRestoredCheckpoint() {
        OptionalLong restored = OptionalLong.of(8);
        OptionalLong horizon = OptionalLong.of(1000);
        assertThat(PreparedTransactionRecovery.isAbandoned(new TransactionId("job", 999, 0, 8), restored, horizon))
                .as("in the restored committables").isFalse();
        assertThat(PreparedTransactionRecovery.isAbandoned(new TransactionId("job", 999, 0, 8), OptionalLong.empty(),
                OptionalLong.empty())).as("fresh start").isTrue();
        assertThat(PreparedTransactionRecovery.isAbandoned(new TransactionId("job", 999, 0, 9), restored, horizon))
                .as("a later checkpoint").isTrue();
        assertThat(PreparedTransactionRecovery.isAbandoned(new TransactionId("job", 1000, 0, 3), restored, horizon))
                .as("a writer that started after checkpoint 8 (another branch)").isTrue();
        assertThat(PreparedTransactionRecovery.isAbandoned(new TransactionId("job", 1000, 0, 3), restored,
                OptionalLong.empty())).as("without a horizon (a savepoint of onceflow 0.1)").isFalse();
    }

    @Test
    void anOrphanLockingAReplayedRowIsRolledBackFirstAndLockTimeoutBoundsAnyWait() throws Exception {
        try (PostgresExactlyOnceWriter writer = freshWriter(config)) {
            checkpoint(writer, 1, "a"); // orphan: checkpoint 1 never completes, it locks row "a"
        }

        // A writer that does not recover this prefix waits for the lock, but only for lock_timeout.
        PostgresSinkConfig otherJob = db.config(db.builder("other").setLockTimeout(Duration.ofMillis(500)));
        try (PostgresExactlyOnceWriter blocked = freshWriter(otherJob)) {
            long start = System.nanoTime();
            write(blocked, "a");
            blocked.prepareCommit();
            assertThatThrownBy(() -> blocked.snapshotState(1))
                    .isInstanceOf(IOException.class)
                    .rootCause()
                    .isInstanceOf(SQLException.class)
                    .hasMessageContaining("lock timeout");
            assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofSeconds(5));
        }

        // The job's own restart claims at its first barrier and rolls the orphan back before writing,
        // so the replay goes through.
        try (PostgresExactlyOnceWriter replay = freshWriter(config)) {
            commit(config, checkpoint(replay, 2, "a")); // a barrier of the restarted job: after 1
        }
        assertThat(db.deliveriesById()).containsExactlyEntriesOf(Map.of("a", 1));
    }

    @Test
    void duplicatesRaiseDeliveriesAndNeverAddRows() throws Exception {
        try (PostgresExactlyOnceWriter writer = freshWriter(config)) { // batches of 100 distinct ids
            String[] ids = IntStream.range(0, 250).mapToObj(i -> "id-" + (i % 120)).toArray(String[]::new);
            commit(config, checkpoint(writer, 1, ids)); // id-0..9 three times, within one batch, id-10.. twice
            // Across checkpoints, once the first one has been committed: until then its prepared
            // transaction holds the rows, and the writer would wait for them up to lock_timeout.
            commit(config, checkpoint(writer, 2, "id-0", "id-0", "id-119"));
        }

        Map<String, Integer> deliveries = db.deliveriesById();
        assertThat(deliveries).hasSize(120);
        assertThat(deliveries.get("id-0")).isEqualTo(5);
        assertThat(deliveries.get("id-9")).isEqualTo(3);
        assertThat(deliveries.get("id-10")).isEqualTo(2);
        assertThat(deliveries.get("id-119")).isEqualTo(3);
    }

    @Test
    void aCheckpointWithoutRowsPreparesNothing() throws Exception {
        try (PostgresExactlyOnceWriter writer = freshWriter(config)) {
            assertThat(writer.prepareCommit()).isEmpty();
            writer.snapshotState(1);
            assertThat(checkpoint(writer, 2, "a").transactionId().checkpointId()).isEqualTo(2);
        }
    }

    @Test
    void theLastRowsArePreparedAtTheFinalCheckpointAfterEndOfInput() throws Exception {
        try (PostgresExactlyOnceWriter writer = db.restoredWriter(config, 6)) {
            PostgresCommittable last = finalCheckpoint(writer, 9, "a", "b");
            assertThat(last.transactionId().checkpointId()).isEqualTo(7);
            assertThat(db.deliveriesById()).isEmpty();
            commit(config, last);
        }
        assertThat(db.deliveriesById()).containsOnlyKeys("a", "b");
    }

    @Test
    void aServerRestartBeforeTheCommitIsRetriedAndThePreparedTransactionSurvives() throws Exception {
        assumeTrue(TestPostgres.shared().canRestart(), "needs the embedded PostgreSQL server to restart it");
        PostgresCommittable committable;
        try (PostgresExactlyOnceWriter writer = freshWriter(config);
                PostgresCommitter committer = new PostgresCommitter(config, PostgresSinkMetrics.unregistered(), "test-job-id")) {
            committable = checkpoint(writer, 1, "a");
            committer.commit(List.of(new RecordingCommitRequest<>(checkpoint(writer, 2, "b"))));

            TestPostgres.shared().restart();

            RecordingCommitRequest<PostgresCommittable> request = new RecordingCommitRequest<>(committable);
            committer.commit(List.of(request));
            assertThat(request.outcome).isEqualTo(Outcome.RETRY_LATER);
            committer.commit(List.of(request.retried()));
            assertThat(request.outcome).isEqualTo(Outcome.COMMITTED);

            assertThatThrownBy(() -> checkpoint(writer, 3, "c"))
                    .as("the writer's connection died with the server: the task must fail and restart")
                    .isInstanceOf(IOException.class);
        }
        assertThat(db.deliveriesById()).containsOnlyKeys("a", "b");
    }

    @Test
    void theAtLeastOnceSinkShowsRowsAtOnceAndCountsReplays() throws Exception {
        try (PostgresAtLeastOnceWriter writer = new PostgresAtLeastOnceWriter(config, 0, 1,
                PostgresSinkMetrics.unregistered())) {
            write(writer, "a", "b", "a");
            writer.flush(false);
            assertThat(db.deliveriesById()).containsExactlyInAnyOrderEntriesOf(Map.of("a", 2, "b", 1));
            write(writer, "b"); // replayed after a restart
            writer.flush(true);
        }
        assertThat(db.deliveriesById()).containsExactlyInAnyOrderEntriesOf(Map.of("a", 2, "b", 2));
        assertThat(db.prepared("job")).isEmpty();
    }

    @Test
    void everyConnectionBoundsItsWaits() throws Exception {
        try (Connection connection = PostgresConnections.open(config, "test");
                Statement statement = connection.createStatement()) {
            assertThat(show(statement, "lock_timeout")).isEqualTo("2s");
            assertThat(show(statement, "statement_timeout")).isEqualTo("20s");
            assertThat(show(statement, "application_name")).isEqualTo("onceflow-job-test");
            assertThat(show(statement, "idle_in_transaction_session_timeout")).isEqualTo("0");
            assertThat(show(statement, "idle_session_timeout")).isEqualTo("0");
            assertThat(show(statement, "transaction_timeout")).isEqualTo("0");
            assertThat(show(statement, "default_transaction_isolation")).isEqualTo("read committed");
        }
    }

    static String show(Statement statement, String setting) throws SQLException {
        try (var result = statement.executeQuery("SHOW " + setting)) {
            result.next();
            return result.getString(1);
        }
    }
}
