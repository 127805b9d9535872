package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.options.StartMode;
import io.onceflow.sink.postgres.options.PostgresTableOptions;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresCommittable;
import io.onceflow.sink.postgres.internal.PostgresWriterState;
import io.onceflow.sink.postgres.internal.PostgresExactlyOnceWriter;
import io.onceflow.sink.postgres.internal.WriterStart;
import io.onceflow.testing.RecordingCommitRequest.Outcome;
import java.io.IOException;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import org.junit.jupiter.api.Test;
import static io.onceflow.sink.postgres.PostgresTwoPhaseCommitTest.checkpoint;
import static io.onceflow.sink.postgres.PostgresTwoPhaseCommitTest.commit;
import static io.onceflow.sink.postgres.PostgresTwoPhaseCommitTest.finalCheckpoint;
import static io.onceflow.sink.postgres.PostgresTwoPhaseCommitTest.write;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Review of issue #24 (deferred claims, server-change reconciliation): interleavings that lose,
 * duplicate, expose early or stall output. Each test states what the design notes require; those
 * that fail show a defect.
 */
class FencingReviewTest {
    private final SinkDatabase db = new SinkDatabase();
    private final PostgresSinkConfig config = db.config("job");

    private static WriterStart attempt(int attemptNumber, OptionalLong restored, List<PostgresWriterState> state) {
        return new WriterStart(0, 1, 128, attemptNumber, "test-job-id", restored, state);
    }

    /**
     * S7: a bounded job restarts before its first checkpoint completes. Attempt 1 claims at barrier
     * 1, which another task declines; then attempt 1 fails. Attempt 2 restores nothing, and its input
     * ends before any barrier. With the end-of-input fallback of deferred claims it claimed with (no
     * checkpoint, attempt 2) against (checkpoint 1, attempt 1), was refused as stale, and so was every
     * later attempt: the job could never finish (STALL). Now it claims at the final checkpoint's
     * barrier, 2.
     */
    @Test
    void aBoundedInputThatEndsAfterRestartsBeforeAnyCompletedCheckpointIsNotRefused() throws Exception {
        SinkDatabase.writer(config, attempt(0, OptionalLong.empty(), List.of())).close(); // claims with none
        try (PostgresExactlyOnceWriter first = SinkDatabase.writer(config, attempt(1, OptionalLong.empty(),
                List.of()))) {
            write(first, "a");
            assertThat(first.prepareCommit()).hasSize(1);
            first.snapshotState(1); // claims and prepares checkpoint 1, which another task then declines
        } // attempt 1 fails before checkpoint 1 completes

        try (PostgresExactlyOnceWriter writer = SinkDatabase.writer(config, attempt(2, OptionalLong.empty(),
                List.of()))) {
            commit(config, finalCheckpoint(writer, 2, "a", "b")); // the input ends before any barrier
        }
        assertThat(db.deliveriesById()).containsExactlyInAnyOrderEntriesOf(Map.of("a", 1, "b", 1));
    }

    /**
     * Run A completes checkpoints 1 and 2. The user tries a branch: run B from checkpoint 1, which
     * prepares checkpoint 2 ("branch") and is cancelled before it completes. The user goes back to
     * A's checkpoint 2: run C. Checkpoint 2's horizon says B's transaction (epoch after the horizon)
     * is not among its committables. But the server changed (here: its timeline grew, as any
     * promotion, even of a synchronous replica, does) between C's registration and its writers'
     * start, and after a change the horizon may have been read on a server whose history lacked a
     * completed checkpoint the current one brought back ({@code ServerChangeReviewTest}): rolling
     * back by it can lose, committing can expose. Until 2026-12-07 the reconciliation committed every
     * prepared transaction with checkpoint id <= 2: the discarded branch's output became visible
     * (EXPOSED, and duplicated with what C replays). Now C refuses, naming the transaction, until an
     * operator decides; it then goes on by itself.
     */
    @Test
    void aServerChangeDoesNotCommitTheTransactionOfADiscardedBranch() throws Exception {
        PostgresWriterState atCheckpoint2;
        try (PostgresExactlyOnceWriter a = db.freshWriter(config)) {
            commit(config, checkpoint(a, 1, "a"));
            write(a, "b");
            PostgresCommittable second = a.prepareCommit().iterator().next();
            atCheckpoint2 = a.snapshotState(2).get(0);
            commit(config, second);
        }

        PostgresSinkConfig branch = new PostgresRunRegistry(config).startRun(1, StartMode.RESTORE, "branch").config();
        PostgresCommittable discarded;
        try (PostgresExactlyOnceWriter b = SinkDatabase.writer(branch, attempt(0, OptionalLong.of(1), List.of()))) {
            discarded = checkpoint(b, 2, "branch"); // prepared, never completed: B is cancelled
        }
        assertThat(db.prepared("job")).hasSize(1);

        PostgresSinkConfig back = new PostgresRunRegistry(config).startRun(1, StartMode.RESTORE, "back to A").config();
        // the server changes before C's writers start: a promotion grows the timeline
        db.execute("UPDATE " + PostgresTableOptions.DEFAULT_RUNS + " SET timeline_id = timeline_id - 1 WHERE run = "
                + back.run());
        try (PostgresExactlyOnceWriter c = SinkDatabase.writer(back, attempt(0, OptionalLong.of(2),
                List.of(atCheckpoint2)))) {
            write(c, "c");
            c.prepareCommit();
            assertThatThrownBy(() -> c.snapshotState(3)).isInstanceOf(IOException.class)
                    .hasMessageContaining(discarded.transactionId().encode())
                    .hasMessageContaining("ROLLBACK PREPARED");
        }
        assertThat(db.prepared("job")).as("nothing decided").containsExactly(discarded.transactionId());
        assertThat(db.deliveriesById()).containsExactlyInAnyOrderEntriesOf(Map.of("a", 1, "b", 1));

        db.execute("ROLLBACK PREPARED '" + discarded.transactionId().encode() + "'"); // the operator's decision
        try (PostgresExactlyOnceWriter c = SinkDatabase.writer(back, attempt(1, OptionalLong.of(2),
                List.of(atCheckpoint2)))) {
            // the restart's first barrier: Flink's checkpoint counter went on
            assertThat(commit(back, checkpoint(c, 4, "c"))).extracting(r -> r.outcome)
                    .containsExactly(Outcome.COMMITTED);
        }
        assertThat(db.deliveriesById()).as("nothing of the discarded branch")
                .containsExactlyInAnyOrderEntriesOf(Map.of("a", 1, "b", 1, "c", 1));
    }

    /**
     * Run 2 is registered shortly before the primary fails; the replica promoted in its place was
     * behind and never received run 2's row. By the time run 2's writers restart (seconds later),
     * other clients' transactions on the promoted server have carried its transaction-id counter past
     * run 2's id (the replication lag is a few hundred xids at most). No sign of the change is left
     * that the writer looks at (its own run's row is gone, so neither its timeline nor its counter can
     * be compared). Until 2026-12-07 it was not adopted, and every attempt was refused as "not in the
     * runs table": the job restarted for ever (STALL) until someone resubmitted it. But run 1's row,
     * recorded before the promotion, shows the older timeline, and no run was submitted on the new
     * one: run 2 was lost with the promotion, and is adopted.
     */
    @Test
    void aRunLostWithAFailoverIsAdoptedAlsoWhenTheCounterHasPassedIt() throws Exception {
        PostgresSinkConfig lost = SinkDatabase.newRun(config);
        // the promoted replica: no row of run 2, run 1's row from before the promotion (older timeline)
        db.execute("DELETE FROM " + PostgresTableOptions.DEFAULT_RUNS + " WHERE run = " + lost.run());
        db.execute("UPDATE " + PostgresTableOptions.DEFAULT_RUNS + " SET timeline_id = timeline_id - 1 WHERE run = "
                + config.run());
        try (PostgresExactlyOnceWriter writer = SinkDatabase.writer(lost, attempt(0, OptionalLong.empty(),
                List.of()))) { // adopted: a run lost with the promotion
            commit(lost, checkpoint(writer, 1, "a"));
        }
        assertThat(db.deliveriesById()).containsExactlyInAnyOrderEntriesOf(Map.of("a", 1));
    }

    /**
     * The server failed over to a replica that never received run 2's row, and its transaction-id
     * counter is still behind run 2: the PostgreSQL writer would adopt the run and go on
     * ({@code ServerChange.seenByWriter}). The Kafka sink's run gate ({@code requireCurrentRun},
     * through {@code SinkRuns.requireNewestRun}) does not know that case and refuses "run 2 is not in
     * the runs table". In OnceflowPipeline the output topic's sink is declared before the PostgreSQL
     * sink on the same stream, so when the two are chained Flink initialises the Kafka writer first
     * (OperatorChain opens from the tail it created first): the gate fails the task before the
     * PostgreSQL writer ever runs, nobody adopts the run, and the job restarts for ever (STALL).
     */
    @Test
    void theKafkaRunGateLetsThroughARunThatThePostgresWriterWouldAdoptAfterAFailover() throws Exception {
        // run 2, registered on the old primary just before it failed: the promoted replica has no row
        // of it, and its counter is behind it
        PostgresSinkConfig lost = config.withRun(config.run() + 1_000_000);

        new PostgresSink(lost).requireCurrentRun(); // passes: the writer decides whether to adopt

        try (PostgresExactlyOnceWriter writer = SinkDatabase.writer(lost, attempt(0, OptionalLong.empty(),
                List.of()))) { // the writer adopts it
            commit(lost, checkpoint(writer, 1, "a"));
        }
        new PostgresSink(lost).requireCurrentRun();
        assertThat(db.deliveriesById()).containsExactlyInAnyOrderEntriesOf(Map.of("a", 1));
    }

    /**
     * Run 2 was registered on the old primary just before it failed; the promoted replica never got
     * its row and its counter is behind it. While run 2's job restarts (the database was away), the
     * user submits its replacement, run 3, on the promoted server: numbered from the server's counter
     * and run 1, so below run 2. Then run 2's writers restart, find their run unknown and the counter
     * behind it, and adopt it: run 2 is now the newest, run 3's writers are refused as replaced (a
     * non-recoverable failure: the newer job is killed), and the older job, which run 3 was meant to
     * replace, runs on; its Kafka writers abort run 3's transactions (so it was until 2026-12-07). Run 3
     * is the only run submitted on the new timeline, after the failover: it is newer than anything the
     * old primary issued, and run 2 is refused as replaced.
     */
    @Test
    void aRunLostWithAFailoverIsNotAdoptedOverANewerSubmission() throws Exception {
        PostgresSinkConfig lost = config.withRun(config.run() + 1_000_000);
        // the promotion: run 1's row (the only one the replica has) is from the older timeline
        db.execute("UPDATE " + PostgresTableOptions.DEFAULT_RUNS + " SET timeline_id = timeline_id - 1 WHERE run = "
                + config.run());
        PostgresSinkConfig replacement = new PostgresRunRegistry(config).startRun(1, StartMode.RESTORE, "v2").config();
        assertThat(replacement.run()).isLessThan(lost.run());

        try (PostgresExactlyOnceWriter stale = SinkDatabase.writer(lost, attempt(1, OptionalLong.of(1), List.of()))) {
            // started now: it adopted run 2 over run 3
            org.junit.jupiter.api.Assertions.fail("the replaced job's writer started (adopted its run over a newer one)");
        } catch (java.io.IOException refused) {
            assertThat(refused).hasMessageContaining("newer run");
        }
        try (PostgresExactlyOnceWriter writer = SinkDatabase.writer(replacement, attempt(0, OptionalLong.of(1),
                List.of()))) {
            commit(replacement, checkpoint(writer, 2, "v2"));
        }
        assertThat(db.deliveriesById()).containsExactlyInAnyOrderEntriesOf(Map.of("v2", 1));
    }
}
