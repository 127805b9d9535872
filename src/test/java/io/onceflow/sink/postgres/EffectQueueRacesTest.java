package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.options.PostgresTableOptions;
import io.onceflow.sink.postgres.options.StartMode;
import static io.onceflow.sink.postgres.BusinessEffectsTest.event;
import static io.onceflow.sink.postgres.BusinessEffectsTest.payment;
import static io.onceflow.sink.postgres.PostgresTwoPhaseCommitTest.checkpoint;
import static io.onceflow.sink.postgres.PostgresTwoPhaseCommitTest.commit;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.onceflow.api.Event;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.PostgresCommittable;
import io.onceflow.sink.postgres.internal.EffectWorker;
import io.onceflow.sink.postgres.internal.PendingEffectsTable;
import io.onceflow.sink.postgres.internal.PostgresExactlyOnceWriter;
import io.onceflow.testing.Eventually;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.HashMap;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Adversarial review of the effect queue and its workers (review branch): each test is an
 * interleaving or an input under which an invariant of docs/design.md does not hold. They fail on
 * the commit under review; each names the invariant it checks.
 */
class EffectQueueRacesTest {
    private static final String QUEUE = SinkDatabase.TABLE + PostgresTableOptions.EFFECT_QUEUE_SUFFIX;

    private final SinkDatabase db = new SinkDatabase();

    @BeforeEach
    void createTheLedger() throws Exception {
        db.createLedger("SELECT 'a' || n, 1000 FROM generate_series(0, 19) n", BusinessEffectsTest.APPLY_PAYMENT);
    }

    private PostgresSinkBuilder sink() {
        return db.builder("ledger").setEffectFunction(BusinessEffectsTest.FUNCTION);
    }

    /**
     * "Slow effects delay results, never checkpoints or ingest." A worker holds the events rows of
     * its whole batch ({@code FOR UPDATE OF q, e}) for as long as the batch's effects run; the
     * writer's upsert of a redelivered id ({@code ON CONFLICT DO UPDATE SET deliveries = ...}) needs
     * that row lock, so it waits for the batch, and past {@code postgres.lock.timeout} the checkpoint
     * fails (55P03, not a data error: the task fails, is restarted, its worker's batch is cancelled
     * with it, and the replay redelivers the same ids to the next worker's batch). With the
     * defaults a batch of 1000 effects of 30 ms each already outlasts the 30 s lock timeout.
     * Redeliveries of recently consumed ids are exactly what a producer retry or an at-least-once
     * replay brings.
     */
    @Test
    void aRedeliveredIdDoesNotMakeTheCheckpointWaitForItsEffectInFlight() throws Exception {
        db.execute("CREATE FUNCTION ledger.slow_payment(message_id text, payload jsonb) RETURNS jsonb"
                + " LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.5);"
                + " RETURN ledger.apply_payment(message_id, payload); END $$");
        // lock timeout 2 s (SinkDatabase's builder), a batch of 10 effects of 0.5 s each: 5 s
        PostgresSinkConfig config = db.config(sink().setEffectFunction("ledger.slow_payment").setBatchSize(10));
        Event[] payments = new Event[10];
        for (int i = 0; i < payments.length; i++) {
            payments[i] = payment("p" + i, "a1", "a2", 1);
        }
        db.commitFreshCheckpoint(config, payments);

        try (EffectWorker worker = EffectWorker.startIfConfigured(config, 0, 1, PostgresSinkMetrics.unregistered())) {
            Eventually.await("the worker is calling the effects", Duration.ofSeconds(30), Duration.ofMillis(10),
                    this::effectsRunning);
            // the producer retried p9: the next checkpoint redelivers it
            long started = System.nanoTime();
            try (PostgresExactlyOnceWriter writer = db.restoredWriter(config, 1)) {
                assertThatCode(() -> checkpoint(writer, 2, payments[9]))
                        .as("the checkpoint of a redelivered id must not wait for (or fail on) its effect in flight")
                        .doesNotThrowAnyException();
            }
            assertThat(Duration.ofNanos(System.nanoTime() - started)).isLessThan(Duration.ofSeconds(2));
        }
    }

    /**
     * "Every pending effect has an owner whatever the next start changes; a start that would strand
     * them is refused." The refusal counts the committed queue only: a prepared transaction of a
     * completed checkpoint (the task died before COMMIT PREPARED) holds queued effects that are
     * invisible to it. A restore without the effect function passes, its committer commits the
     * restored committable, and the effect is queued with no worker to apply it (the next
     * restart of any writer then fails on the refusal: a restart loop).
     */
    @Test
    void aRestoreWithoutTheEffectFunctionIsRefusedWhileAPreparedTransactionQueuedEffects() throws Exception {
        PostgresSinkConfig withEffect = db.config(sink());
        PostgresCommittable completed;
        try (PostgresExactlyOnceWriter writer = db.freshWriter(withEffect)) {
            completed = checkpoint(writer, 1, payment("p1", "a1", "a2", 10));
        } // checkpoint 1 completed; the task died before the committer's COMMIT PREPARED

        PostgresRunRegistry withoutEffect = db.builder("ledger").build();
        assertThatThrownBy(() -> withoutEffect.startRun(1, StartMode.RESTORE, "restored without the effect"))
                .as("p1's effect is queued in a prepared transaction this start would commit and never apply")
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("effect");
    }

    /**
     * The migration from the partial index of pending effects. A job of the previous version that
     * died after a completed checkpoint left a prepared transaction whose new rows wait for their
     * effect (result NULL, effect_transaction set) and that only the new version's committer will
     * commit. The new version's start runs DROP INDEX on the events table, which waits for that
     * prepared transaction's lock: the start fails on lock_timeout (and queues a lock request that
     * blocks every other session on the events table meanwhile), and every later start too, since
     * the committer that would end the transaction belongs to the job that cannot start. And were
     * the transaction committed after the migration (the intended order of a restore), its rows
     * would never be queued: the queue is filled from the rows visible at start only.
     */
    @Test
    void anUpgradeRestoringAPreviousVersionsPreparedTransactionStartsAndAppliesItsEffects() throws Exception {
        db.config(sink()); // today's tables ...
        // ... as the previous version left them: no queue, the partial index of pending effects
        db.execute("DROP TABLE " + QUEUE);
        db.execute("CREATE INDEX " + SinkDatabase.TABLE + "_pending_effects ON " + SinkDatabase.TABLE
                + " (effect_transaction) WHERE result IS NULL AND effect_transaction IS NOT NULL");
        String gid = "previous-version-checkpoint-7";
        try (Connection previous = db.database.connect(); Statement statement = previous.createStatement()) {
            previous.setAutoCommit(false);
            statement.execute("INSERT INTO " + SinkDatabase.TABLE + " (id, payload, source_topic, source_partition,"
                    + " source_offset, deliveries, effect_transaction) VALUES ('p1', '{\"from\":\"a1\",\"to\":\"a2\","
                    + "\"amount\":10}', 'payments', 0, 1, 1, '" + gid + "')");
            statement.execute("PREPARE TRANSACTION '" + gid + "'");
        }
        try {
            PostgresRunRegistry upgraded = db.builder("ledger").setEffectFunction(BusinessEffectsTest.FUNCTION).build();
            assertThatCode(() -> upgraded.startRun(1, StartMode.RESTORE, "new version"))
                    .as("the new version starts while its restored checkpoint's transaction is prepared")
                    .doesNotThrowAnyException();
            db.execute("COMMIT PREPARED '" + gid + "'"); // the new version's committer
            try (EffectWorker worker = EffectWorker.startIfConfigured(db.config(sink()), 0, 1,
                    PostgresSinkMetrics.unregistered())) {
                Eventually.await("p1 consumed: its effect is applied", Duration.ofSeconds(30), Duration.ofMillis(50),
                        () -> "applied".equals(db.effectStatuses().get("p1")));
            }
        } finally {
            boolean[] left = {false};
            db.query("SELECT FROM pg_prepared_xacts WHERE gid = '" + gid + "'", row -> left[0] = true);
            if (left[0]) {
                db.execute("ROLLBACK PREPARED '" + gid + "'");
            }
        }
    }

    /**
     * Head-of-line blocking: an effect that fails for a reason that is not a verdict on its message
     * (here a statement timeout; equally a 53200 out of shared memory from a keys function returning
     * a huge array, or any 42xxx raised for one payload) is retried forever, which is intended; but
     * the batch always takes the oldest queued effects, so after halving down to one every try takes
     * that same effect again, and nothing behind it (other partitions, other keys) is ever applied:
     * one slow message stops every effect of the table. The worker sets the partition of an effect
     * that fails alone aside for its backoff: other partitions go on.
     */
    @Test
    void anEffectRetriedForANonDataReasonDoesNotStallTheEffectsQueuedBehindIt() throws Exception {
        db.execute("CREATE FUNCTION ledger.slow(message_id text, payload jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$"
                + " BEGIN IF payload ? 'slow' THEN PERFORM pg_sleep(2); END IF;"
                + " RETURN ledger.apply_payment(message_id, payload); END $$");
        PostgresSinkConfig config = db.config(sink().setEffectFunction("ledger.slow")
                .setStatementTimeout(Duration.ofMillis(500)));
        // p2 in another partition: one partition's order is kept, so only other partitions may pass p1
        db.commitFreshCheckpoint(config, event("p1", "{\"from\":\"a1\",\"to\":\"a2\",\"amount\":10,\"slow\":true}"),
                new Event("p2", "{\"from\":\"a3\",\"to\":\"a4\",\"amount\":10}".getBytes(StandardCharsets.UTF_8),
                        "payments", 1, 1, 0L, new HashMap<>()));

        try (EffectWorker worker = EffectWorker.startIfConfigured(config, 0, 1, PostgresSinkMetrics.unregistered())) {
            assertThat(Eventually.holdsWithin(Duration.ofSeconds(15), Duration.ofMillis(100),
                    () -> "applied".equals(db.effectStatuses().get("p2"))))
                    .as("p2, on other accounts, is applied while p1 is retried").isTrue();
        }
    }

    /**
     * A queue row whose events row is gone (an operator's DELETE of an inbox row to have a message
     * processed again; or retention racing a re-drive: the purge's NOT EXISTS on the queue is read
     * in its snapshot, the re-drive commits its queue row before the purge locks the row, and the
     * read-committed recheck does not re-run the subquery) is never taken by a worker (the batch
     * joins the events table) and stays in the backlog for good. When the id comes again, its new
     * events row cannot queue its effect (23505 on the queue's key), which RowIsolation takes for a
     * data error of the row: the message goes to the rejects table, its effect is never applied.
     */
    @Test
    void aStaleQueueRowDoesNotSendTheMessageToTheRejectsTable() throws Exception {
        PostgresSinkConfig config = db.config(sink());
        db.commitFreshCheckpoint(config, payment("p1", "a1", "a2", 10));
        db.execute("DELETE FROM " + SinkDatabase.TABLE + " WHERE id = 'p1'"); // its effect still queued

        PostgresCommittable redelivered;
        try (PostgresExactlyOnceWriter writer = db.restoredWriter(config, 1)) {
            redelivered = checkpoint(writer, 2, payment("p1", "a1", "a2", 10));
        }
        commit(config, redelivered);

        assertThat(db.rejects()).as("p1's data is fine").doesNotContainKey("p1");
        SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered());
        assertThat(db.effectStatuses()).containsEntry("p1", "applied");
        assertThat(db.queuedEffects()).isZero();
    }

    private boolean effectsRunning() throws Exception {
        boolean[] running = {false};
        db.query("SELECT FROM pg_stat_activity WHERE application_name LIKE 'onceflow-ledger-effects-%'"
                + " AND state = 'active' AND query LIKE '%slow_payment%'", row -> running[0] = true);
        return running[0];
    }
}
