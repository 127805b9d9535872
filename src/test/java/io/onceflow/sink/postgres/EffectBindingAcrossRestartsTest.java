package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.options.StartMode;
import static io.onceflow.sink.postgres.BusinessEffectsTest.APPLY_PAYMENT;
import static io.onceflow.sink.postgres.BusinessEffectsTest.FUNCTION;
import static io.onceflow.sink.postgres.BusinessEffectsTest.payment;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.entry;

import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.PostgresCommittable;
import io.onceflow.sink.postgres.internal.PostgresExactlyOnceWriter;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The binding of queued effects to their sink and function across what happens between a run's
 * start and its end: a function dropped and recreated while the job runs, a JobManager failover that
 * runs main again, and an upgrade resumed from a checkpoint of the earlier version.
 */
class EffectBindingAcrossRestartsTest {
    private final SinkDatabase db = new SinkDatabase();

    @BeforeEach
    void createTheLedger() throws Exception {
        EffectBindingTest.createTheLedgerAndAnotherTeamsFunction(db);
    }

    /**
     * A team redeploys its function with DROP + CREATE (a migration tool, or a changed result type)
     * while the job runs. The rows queued in between record effect_function NULL (the identity of a
     * missing function); the workers look only for their function's identity, a writer's restart does
     * not adopt, so the effect waits until the next run's start: the message is consumed, its effect
     * never applied while the job runs on. Before the binding the worker retried the missing function
     * (SQLSTATE 42883 is transient) and applied it once the function was back.
     */
    @Test
    void anEffectQueuedWhileTheFunctionWasRecreatedIsAppliedWithoutANewRun() throws Exception {
        PostgresSinkConfig sink = db.config(db.builder("ledger").setEffectFunction(FUNCTION));
        PostgresCommittable committable;
        try (PostgresExactlyOnceWriter writer = db.freshWriter(sink)) {
            db.execute("DROP FUNCTION " + FUNCTION + "(text, jsonb)");
            committable = PostgresTwoPhaseCommitTest.checkpoint(writer, 1, payment("p1", "alice", "bob", 10));
            db.execute(APPLY_PAYMENT);
        }
        PostgresTwoPhaseCommitTest.commit(sink, committable);
        // a writer's restart (a task failover, not a run's start)
        db.restoredWriter(sink, 1).close();

        // the restored writer's own worker may have applied it already: the oracle is the ledger
        SinkDatabase.drainEffects(sink, PostgresSinkMetrics.unregistered());
        assertThat(db.ledgerBalances()).containsOnly(entry("alice", 90), entry("bob", 10));
        assertThat(db.queuedEffects()).isZero();
    }

    /**
     * Two sinks that started on an empty queue both run (docs/effects.md: "What the start cannot
     * see"), and the binding promises that neither stops the other. A JobManager failover re-runs
     * main, which continues the run (SinkRuns.continued) through the same run-start checks: the
     * other sink's queued effects now refuse the running job's resume.
     */
    @Test
    void aJobManagerFailoverIsNotRefusedBecauseAnotherSinkQueuedEffectsSinceTheStart() throws Exception {
        PostgresSinkConfig jobA = new PostgresRunRegistry(db.builder("job_a").setEffectFunction(FUNCTION).build().config())
                .startRun(1, StartMode.FRESH_DISCARDING_PENDING, "job a", "00000000000000000000000000000a0a").config();
        PostgresSinkConfig jobB = db.config(db.builder("job_b").setEffectFunction("ledger.log_call"));
        db.commitFreshCheckpoint(jobB, payment("b1", "alice", "bob", 10));

        PostgresRunRegistry failedOver = new PostgresRunRegistry(
                db.builder("job_a").setEffectFunction(FUNCTION).build().config());

        assertThat(failedOver.continueRun(1, "00000000000000000000000000000a0a")).isPresent();
        assertThat(jobA).isNotNull();
    }

    /**
     * An upgrade resumed from a retained checkpoint of the earlier version: the checkpoint's
     * prepared transaction queued effects in the old queue, and only this job's committer, after the
     * start, commits it. The start's ALTER TABLE ... ADD COLUMN waits for it: lock_timeout, a raw SQL
     * error, the same at every start: the upgrade can never resume. The start must at least say why
     * and what to do (the earlier migration of the pending index gave up the lock on purpose).
     */
    @Test
    void anUpgradeBehindAnEarlierVersionsPreparedTransactionIsToldWhatToDo() throws Exception {
        db.execute(SinkDatabase.ddlBeforeBoundEffects());
        db.execute("BEGIN; INSERT INTO onceflow_events (id, payload, effect_transaction) VALUES ('p0',"
                + " '{\"from\":\"alice\",\"to\":\"bob\",\"amount\":5}', 'ledger-old');"
                + " INSERT INTO onceflow_events_effect_queue (id, effect_transaction) VALUES ('p0', 'ledger-old');"
                + " PREPARE TRANSACTION 'old_version_checkpoint'");
        try {
            assertThatThrownBy(() -> db.config(db.builder("ledger").setEffectFunction(FUNCTION)))
                    .isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("prepared transaction")
                    .hasMessageContaining("stop-with-savepoint");
        } finally {
            db.execute("ROLLBACK PREPARED 'old_version_checkpoint'");
        }
    }

}
