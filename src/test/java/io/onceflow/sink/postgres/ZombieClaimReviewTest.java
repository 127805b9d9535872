package io.onceflow.sink.postgres;

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

/**
 * Interleavings that a review of a fix tried for S6b of issue #31 (a mark on the claim that a
 * deferral met, not kept) found, each one Flink allows. A and C lost a completed checkpoint's
 * transaction while claims at start were ordered by attempt numbers; with every claim made at a
 * barrier (docs/failover.md, "JobManager failover") the woken attempt is refused. B was a stall the
 * mark brought: kept, as a guard.
 */
class ZombieClaimReviewTest {
    private final SinkDatabase db = new SinkDatabase();
    private final PostgresSinkConfig config = db.config("job");

    private static WriterStart start(int subtask, int parallelism, int attempt, OptionalLong restored) {
        return new WriterStart(subtask, parallelism, 128, attempt, "test-job-id", restored, List.<PostgresWriterState>of());
    }

    /** A zombie's start: constructed late stands for an attempt frozen before its first statement. */
    private PostgresExactlyOnceWriter wokenOrRefused(WriterStart frozen) {
        try {
            return SinkDatabase.writer(config, frozen);
        } catch (IOException refused) {
            return null;
        }
    }

    /**
     * A. Old JobManager: attempt 0 (fresh) completes checkpoint 1; a task fails, attempt 1 restores 1
     * and its TaskManager freezes while it initialises, with the old JobManager's barrier 2 to come.
     * The JobManager fails over. The new JobManager's attempt 0 restores 1 and claims at its first
     * barrier, 3; checkpoint 3 completes. With claims at start by attempt numbers, the woken attempt
     * 1 (same restored checkpoint, higher number) took the index over, ended the live writer and
     * rolled back checkpoint 3's transaction before the committer committed it.
     */
    @Test
    void aWokenAttemptOfTheOldJobManagerWithAHigherNumberDoesNotPassTheNewOnesImmediateClaim() throws Exception {
        try (PostgresExactlyOnceWriter first = SinkDatabase.writer(config, start(0, 1, 0, OptionalLong.empty()))) {
            commit(config, checkpoint(first, 1, "a"));
        }
        WriterStart frozenOldJobManagerAttempt = start(0, 1, 1, OptionalLong.of(1));

        try (PostgresExactlyOnceWriter live = SinkDatabase.writer(config, start(0, 1, 0, OptionalLong.of(1)))) {
            PostgresCommittable completed = checkpoint(live, 3, "b"); // checkpoint 3 completes

            PostgresExactlyOnceWriter zombie = wokenOrRefused(frozenOldJobManagerAttempt);
            if (zombie != null) {
                try (zombie) { // it processes the old JobManager's barrier 2
                    write(zombie, "b");
                    zombie.prepareCommit();
                    zombie.snapshotState(2);
                } catch (IOException refused) {
                    // refused as stale: what should happen
                }
            }
            assertThat(db.prepared("job")).as("the completed checkpoint's transaction").containsExactly(
                    completed.transactionId());
            assertThat(commit(config, completed)).extracting(r -> r.outcome).containsExactly(Outcome.COMMITTED);
        }
        assertThat(db.deliveriesById()).containsExactlyInAnyOrderEntriesOf(Map.of("a", 1, "b", 1));
    }

    /**
     * B (STALL with a mark on the claim a deferral met; passes on main; one JobManager, no failover). Attempt 1 restores 1 and
     * freezes before its first statement; the restart's attempt 2 claims (1, 0, 2) at once. Attempt 1
     * wakes, defers and marks the LIVE claim (1, 0, MAX). Attempt 2 fails before a checkpoint
     * completes. Attempt 3 restores 1 and defers (3 is not above MAX); the bounded input ends before
     * a barrier: the fallback claims (1, 0, 3) against (1, 0, MAX): STALE. Every later attempt
     * restores 1 and is refused the same way: the job never finishes. Before the change attempt 3
     * claimed at once (3 &gt; 2).
     */
    @Test
    void aZombiesDeferralDoesNotKeepABoundedJobOfOneJobManagerFromFinishing() throws Exception {
        try (PostgresExactlyOnceWriter first = SinkDatabase.writer(config, start(0, 1, 0, OptionalLong.empty()))) {
            commit(config, checkpoint(first, 1, "a"));
        }
        WriterStart frozen = start(0, 1, 1, OptionalLong.of(1));
        try (PostgresExactlyOnceWriter live = SinkDatabase.writer(config, start(0, 1, 2, OptionalLong.of(1)))) {
            PostgresExactlyOnceWriter zombie = wokenOrRefused(frozen); // defers
            if (zombie != null) {
                zombie.close();
            }
            write(live, "b");
        } // attempt 2 fails before checkpoint 2

        try (PostgresExactlyOnceWriter writer = SinkDatabase.writer(config, start(0, 1, 3, OptionalLong.of(1)))) {
            // the input ends before any barrier: the prepare was refused with the mark
            commit(config, finalCheckpoint(writer, 2, "b"));
        }
        assertThat(db.deliveriesById()).containsExactlyInAnyOrderEntriesOf(Map.of("a", 1, "b", 1));
    }

    /**
     * C (one JobManager; the adaptive scheduler rescales 2 -&gt; 1 -&gt; 2 before a checkpoint
     * completes). Parallelism 2 completes checkpoint 1. Rescaled to 1, attempt 2 (H) freezes with
     * barrier 2 in its input. Rescaled to 2, attempt 3: both subtasks claim at barrier 3, and
     * checkpoint 3 completes. H wakes and processes barrier 2. With claims at start by attempt
     * numbers (H recorded one row and deferred on the other), H claimed at 2 over both rows, ended
     * both subtasks and rolled back their transactions of checkpoint 3: LOST.
     */
    @Test
    void aDeferredAttemptsOwnRecordedRowIsNotPassedByAttemptNumberAfterARescale() throws Exception {
        try (PostgresExactlyOnceWriter w0 = SinkDatabase.writer(config, start(0, 2, 0, OptionalLong.empty()));
                PostgresExactlyOnceWriter w1 = SinkDatabase.writer(config, start(1, 2, 0, OptionalLong.empty()))) {
            commit(config, checkpoint(w0, 1, "a0"), checkpoint(w1, 1, "a1"));
        }
        SinkDatabase.writer(config, start(0, 2, 1, OptionalLong.of(1))).close();
        SinkDatabase.writer(config, start(1, 2, 1, OptionalLong.of(1))).close();

        PostgresExactlyOnceWriter frozen = SinkDatabase.writer(config, start(0, 1, 2, OptionalLong.of(1)));
        try (PostgresExactlyOnceWriter s0 = SinkDatabase.writer(config, start(0, 2, 3, OptionalLong.of(1)));
                PostgresExactlyOnceWriter s1 = SinkDatabase.writer(config, start(1, 2, 3, OptionalLong.of(1)))) {
            write(frozen, "h"); // held in memory, deferred
            PostgresCommittable x = checkpoint(s0, 3, "x"); // both subtasks take barrier 3:
            PostgresCommittable y = checkpoint(s1, 3, "y"); // checkpoint 3 completes

            try { // H wakes and processes barrier 2 of the earlier execution
                frozen.prepareCommit();
                frozen.snapshotState(2);
            } catch (IOException refused) {
                // refused as stale: what should happen
            } finally {
                frozen.close();
            }
            assertThat(db.prepared("job")).as("checkpoint 3's transactions").contains(x.transactionId(),
                    y.transactionId());
            assertThat(commit(config, x, y)).extracting(r -> r.outcome)
                    .containsExactly(Outcome.COMMITTED, Outcome.COMMITTED);
        }
        assertThat(db.deliveriesById()).containsEntry("x", 1).containsEntry("y", 1);
    }
}
