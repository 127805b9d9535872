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
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import org.junit.jupiter.api.Test;
import static io.onceflow.sink.postgres.PostgresTwoPhaseCommitTest.commit;
import static io.onceflow.sink.postgres.PostgresTwoPhaseCommitTest.write;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * What an adversarial review of "every claim at the writer's first checkpoint barrier" (#31 item 1)
 * found; each test failed before its fix.
 *
 * <p>F1 (the first two tests): a writer claimed only its own index and the covered indices earlier
 * writers had recorded. An index that a wider execution started but never claimed (its writer froze
 * before its first barrier) had no row, so the narrower execution that followed fenced nothing
 * there. The frozen attempt, woken with its own execution's barrier in its input, claimed that index
 * unopposed, wrote its held events and prepared them. Its gid's checkpoint id (its restore + 1) was
 * at most every later restore, and its epoch below every later horizon, so no recovery rolled it
 * back: an orphan that held row locks for good (STALL), or, after a server change, was committed by
 * the reconciliation (DUPLICATE). Fixed: at its first barrier a writer records its claim on every
 * index it covers up to the maximum parallelism ({@code IndexClaims.fenceCovered}).
 *
 * <p>Flink allows it: the adaptive scheduler (or reactive mode) scales 1 -&gt; 4 when slots come, a
 * TaskManager freezes (GC, SIGSTOP, VM pause) while subtask 3 of the new execution holds events
 * and has barrier 2 queued in its input gate; the JobManager declares the TaskManager lost and
 * restarts the job at parallelism 1 from checkpoint 1; the frozen TaskManager resumes and its task
 * thread processes the queued barrier before it learns it was cancelled (as in
 * ZombieClaimReviewTest C).
 *
 * <p>F2 (the third test): a JDBC URL that sets {@code ApplicationName} named every writer session
 * after it, so the run-start check, which finds writers before their first barrier by name, missed
 * them. Fixed: every connection sets its own name after connecting.
 */
class BarrierClaimReviewTest {
    private final SinkDatabase db = new SinkDatabase();
    private final PostgresSinkConfig config = db.config("job");

    private static WriterStart start(int subtask, int parallelism, int attempt, OptionalLong restored,
            List<PostgresWriterState> state) {
        return new WriterStart(subtask, parallelism, 128, attempt, "test-job-id", restored, state);
    }

    private static PostgresCommittable single(Collection<PostgresCommittable> committables) {
        assertThat(committables).hasSize(1);
        return committables.iterator().next();
    }

    /**
     * Parallelism 1 completes checkpoint 1 ("a"). Rescaled to 4: subtask 3 (Z) reads "x", "h" and
     * freezes before its first barrier, 2. Rescaled back to 1 (attempt 2): claims at 3, checkpoint 3
     * completes with "x"; it writes "h" for checkpoint 4 and fails. Returns checkpoint 3's writer
     * state; Z wakes and processes barrier 2.
     */
    private List<PostgresWriterState> zombieOfTheWiderExecutionWakesAfterTheNarrowerCompletedCheckpoint3()
            throws Exception {
        try (PostgresExactlyOnceWriter first = SinkDatabase.writer(config, start(0, 1, 0, OptionalLong.empty(),
                List.of()))) {
            write(first, "a");
            PostgresCommittable c1 = single(first.prepareCommit());
            first.snapshotState(1);
            commit(config, c1);
        }
        PostgresExactlyOnceWriter zombie = SinkDatabase.writer(config, start(3, 4, 1, OptionalLong.of(1), List.of()));
        write(zombie, "x", "h"); // held in memory: touches nothing

        List<PostgresWriterState> state3;
        try (PostgresExactlyOnceWriter live = SinkDatabase.writer(config, start(0, 1, 2, OptionalLong.of(1),
                List.of()))) {
            write(live, "x");
            PostgresCommittable c3 = single(live.prepareCommit());
            state3 = live.snapshotState(3); // claims index 0 (the only one recorded) at barrier 3
            assertThat(commit(config, c3)).extracting(r -> r.outcome).containsExactly(Outcome.COMMITTED);
            write(live, "h"); // checkpoint 4's transaction: the attempt fails before barrier 4
        }

        try { // Z wakes, its TaskManager not yet told; it processes barrier 2 of its execution
            zombie.prepareCommit();
            zombie.snapshotState(2);
        } catch (IOException refused) {
            // what should happen: refused as stale
        } finally {
            zombie.close();
        }
        return state3;
    }

    /**
     * F1, STALL. The next attempt restores checkpoint 3 and replays "h": its first barrier's
     * transaction waits for the zombie's orphan's row lock on "h" (lock_timeout, a task failure),
     * and so does every later attempt, which restores 3 again and keeps the orphan.
     */
    @Test
    void aZombieOfAWiderExecutionClaimsAnIndexTheNarrowerOneNeverRecordedAndItsOrphanStallsEveryRestart()
            throws Exception {
        List<PostgresWriterState> state3 = zombieOfTheWiderExecutionWakesAfterTheNarrowerCompletedCheckpoint3();

        try (PostgresExactlyOnceWriter restarted = SinkDatabase.writer(config, start(0, 1, 3, OptionalLong.of(3),
                state3))) {
            write(restarted, "h");
            PostgresCommittable c5 = single(restarted.prepareCommit());
            restarted.snapshotState(5); // claims 0 and 3, recovers, writes "h", prepares
            assertThat(commit(config, c5)).extracting(r -> r.outcome).containsExactly(Outcome.COMMITTED);
        }
        assertThat(db.prepared("job")).isEmpty();
        assertThat(db.deliveriesById()).containsExactlyInAnyOrderEntriesOf(Map.of("a", 1, "x", 1, "h", 1));
    }

    /**
     * F1, DUPLICATE. As above, then the server fails over to a replica (asynchronous replication,
     * a promotion: a newer timeline). The restored writer reconciles: it commits every covered
     * prepared transaction whose checkpoint id is at most the restored one, the zombie's included
     * (gid checkpoint 2 &lt;= 3): "x" is delivered twice.
     */
    @Test
    void afterAServerChangeTheRestoredWriterCommitsTheZombiesOrphanAsACompletedCheckpoint() throws Exception {
        List<PostgresWriterState> state3 = zombieOfTheWiderExecutionWakesAfterTheNarrowerCompletedCheckpoint3();
        // a promotion: the run was registered on an earlier timeline
        db.execute("UPDATE " + PostgresTableOptions.DEFAULT_RUNS + " SET timeline_id = timeline_id - 1"
                + " WHERE sink_prefix = 'job'");

        try (PostgresExactlyOnceWriter restarted = SinkDatabase.writer(config, start(0, 1, 3, OptionalLong.of(3),
                state3))) {
            write(restarted, "y");
            PostgresCommittable c5 = single(restarted.prepareCommit());
            restarted.snapshotState(5);
            commit(config, c5);
        }
        assertThat(db.deliveriesById()).as("x was completed once, in checkpoint 3")
                .containsEntry("x", 1).doesNotContainKey("h");
    }

    /**
     * F2, the run-start check by application_name misses live writers. A JDBC URL that sets
     * {@code ApplicationName} (common practice, and URL parameters win over the driver's
     * properties) names every writer session after it: a second submission with the same prefix
     * is not refused while the first job's writers run before their first barrier (no lock held,
     * so only the name could tell). Flink allows it: any restart, or a rescale, puts every writer
     * before its first barrier for up to a checkpoint interval.
     */
    @Test
    void aSecondJobIsRefusedWhileTheFirstJobsWritersRunBeforeTheirBarrierWithAnApplicationNameInTheUrl()
            throws Exception {
        String url = db.database.jdbcUrl();
        PostgresSinkBuilder named = db.builder("named")
                .setJdbcUrl(url + (url.contains("?") ? "&" : "?") + "ApplicationName=reporting");
        PostgresSinkConfig first = SinkDatabase.config(named);
        try (PostgresExactlyOnceWriter running = SinkDatabase.writer(first, start(0, 1, 0, OptionalLong.empty(),
                List.of()))) {
            write(running, "a");
            assertThatThrownBy(() -> named.build().startRun(1, StartMode.FRESH_DISCARDING_PENDING, "second job"))
                    .as("the first job's writer is live")
                    .hasMessageContaining("is in use by a running job");
        }
    }
}
