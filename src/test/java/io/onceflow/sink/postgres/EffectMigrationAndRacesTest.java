package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.options.PostgresTableOptions;
import static io.onceflow.sink.postgres.BusinessEffectsTest.FUNCTION;
import static io.onceflow.sink.postgres.BusinessEffectsTest.event;
import static io.onceflow.sink.postgres.BusinessEffectsTest.payment;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.entry;

import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.PendingEffectsTable;
import io.onceflow.sink.postgres.internal.PostgresAtLeastOnceWriter;
import io.onceflow.testing.Eventually;
import io.onceflow.tools.effects.EffectActions;
import io.onceflow.tools.retention.Retention;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/**
 * Failed effects across upgrades, renamed functions and retention (found by an adversarial review
 * of the change that keeps failed effects queued; each failed on that change): a re-drive racing a
 * purge never strands an effect, jobs without an effect function start on the previous version's
 * tables, the failures a previous version recorded reach the queue on every migration path, and
 * failures waiting for an operator do not refuse a start with the fixed function.
 */
class EffectMigrationAndRacesTest {
    private static final String QUEUE = SinkDatabase.TABLE + PostgresTableOptions.EFFECT_QUEUE_SUFFIX;
    /** The ledger's function while a bug makes it refuse payments flagged "new-scheme". */
    private static final String BROKEN = BusinessEffectsTest.APPLY_PAYMENT.replace("BEGIN\n",
            "BEGIN\n  IF payload ? 'new-scheme' THEN RAISE EXCEPTION 'scheme not supported: %', message_id; END IF;\n");

    private final SinkDatabase db = new SinkDatabase();

    /**
     * A re-drive of a rejection while a purge deletes its row (an at-least-once sink's rows, whose
     * effect_transaction is NULL). A purge that judged the rows with one old snapshot deleted the row
     * after the re-drive had queued its effect: the queue row stayed, no worker ever took it (the
     * batch joins the events row). A purge now locks its batch first and judges it with a new
     * snapshot, so the re-drive waits for the purge and finds no row, or, had it locked the row first,
     * the purge skips it: nothing is stranded either way.
     *
     * <p>The purge is paused by a trigger on the first row it deletes, and the plan (planner settings
     * of the test's database) makes it lock rows one by one.
     */
    @Test
    void aRejectionReDrivenWhileItsRowIsPurgedIsNeverStranded() throws Exception {
        db.createLedger("VALUES ('alice', 100), ('bob', 0), ('carol', 0)", BusinessEffectsTest.APPLY_PAYMENT);
        PostgresSinkConfig config = db.config(db.builder("ledger").setEffectFunction(FUNCTION));
        try (PostgresAtLeastOnceWriter writer = new PostgresAtLeastOnceWriter(config, 0, 1, PostgresSinkMetrics.unregistered())) {
            writer.write(payment("a", "alice", "bob", 1), null);
            writer.write(payment("broke", "carol", "bob", 10), null);
            writer.flush(true);
        }
        SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered());
        assertThat(db.effectStatuses()).containsOnly(entry("a", "applied"), entry("broke", "rejected"));
        db.query("SELECT count(*) FROM " + SinkDatabase.TABLE + " WHERE effect_transaction IS NULL",
                row -> assertThat(row.getLong(1)).as("the at-least-once writer's rows").isEqualTo(2));
        db.execute("UPDATE " + SinkDatabase.TABLE + " SET first_processed_at = now() - interval '15 days'");

        db.execute("CREATE TABLE review_pause (released boolean NOT NULL)");
        db.execute("INSERT INTO review_pause VALUES (false)");
        db.execute("CREATE FUNCTION review_pause() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                + " IF OLD.id = 'a' THEN LOOP EXIT WHEN (SELECT released FROM review_pause); PERFORM pg_sleep(0.02);"
                + " END LOOP; END IF; RETURN OLD; END $$");
        db.execute("CREATE TRIGGER review_pause BEFORE DELETE ON " + SinkDatabase.TABLE
                + " FOR EACH ROW EXECUTE FUNCTION review_pause()");
        db.execute("DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET enable_hashjoin = off', current_database());"
                + " EXECUTE format('ALTER DATABASE %I SET enable_hashagg = off', current_database());"
                + " EXECUTE format('ALTER DATABASE %I SET enable_mergejoin = off', current_database());"
                + " EXECUTE format('ALTER DATABASE %I SET enable_indexscan = off', current_database());"
                + " EXECUTE format('ALTER DATABASE %I SET enable_bitmapscan = off', current_database()); END $$");

        Retention retention = new Retention(config.connection(), config.tables(), config.writer(), "ledger",
                Duration.ofDays(7));
        CompletableFuture<Retention.Purged> purge = CompletableFuture.supplyAsync(() -> {
            try {
                return retention.purge(Duration.ofDays(14), 1000);
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        Eventually.await("the purge took its snapshot and deletes its first row", Duration.ofSeconds(15),
                Duration.ofMillis(10), () -> {
                    long[] paused = {0};
                    db.query("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'"
                            + " AND query LIKE 'DELETE FROM " + SinkDatabase.TABLE + "%'", row -> paused[0] = row.getLong(1));
                    return paused[0] == 1;
                });

        db.execute("UPDATE ledger.accounts SET balance = 10 WHERE id = 'carol'"); // the mistake, mended
        EffectActions actions = new EffectActions(config.connection(), config.tables(), config.writer(), "ledger");
        assertThatThrownBy(() -> actions.retryRejected(List.of("broke"), "TICKET-9: carol funded"))
                .as("the purge holds the row: the re-drive waits, up to its lock timeout, and changes nothing")
                .isInstanceOf(SQLException.class).hasMessageContaining("lock timeout");
        db.execute("UPDATE review_pause SET released = true");
        assertThat(purge.get().events()).isEqualTo(2);
        assertThat(actions.retryRejected(List.of("broke"), "TICKET-9: again").notDone())
                .containsOnly(entry("broke", "no row in " + SinkDatabase.TABLE));

        assertThat(db.queuedEffects()).as("no queue row left that no worker takes").isZero();
        assertThat(db.ledgerBalances()).containsEntry("carol", 10).containsEntry("bob", 1);
    }

    /**
     * Every database of the previous version has an effect queue without {@code failed_at} (every
     * sink created the queue, with or without an effect function) and no effect log. A start without
     * an effect function creates the log but never adds {@code failed_at} (only a start with a function
     * does), and then runs refuseStrandedEffects, whose backlog query names {@code failed_at}: the start
     * fails with 42703 "column failed_at does not exist", at every start, for every job that has no
     * effect function.
     */
    @Test
    void aJobWithoutAnEffectFunctionStartsOnThePreviousVersionsTables() throws Exception {
        db.config("job");
        // as the previous version left them
        db.execute("ALTER TABLE " + QUEUE + " DROP COLUMN failed_at");
        db.execute("DROP TABLE " + SinkDatabase.TABLE + "_effect_log");

        assertThatCode(() -> db.config("job")).doesNotThrowAnyException();
    }

    /**
     * The migration moves the failures an earlier version recorded only in the events rows into the
     * queue, marked failed, but only when it adds {@code failed_at} to an existing queue. An events
     * table of the version that called effects in the committer has no queue at all: the start creates
     * the queue with {@code failed_at} already, the legacy failures are never queued, and retry-failed
     * and skip (which act only on queue rows marked failed) can no longer reach them. Before this
     * change retry-failed re-drove them from the events rows; now they vanish from the gauge, the
     * alert and every command (the command even says "failed: re-drive it with retry-failed").
     */
    @Test
    void aFailureRecordedBeforeTheQueueExistedCanStillBeReDriven() throws Exception {
        db.createLedger("VALUES ('alice', 100), ('bob', 0)", BusinessEffectsTest.APPLY_PAYMENT);
        PostgresSinkBuilder sink = db.builder("ledger").setEffectFunction(FUNCTION);
        db.config(sink); // today's tables ...
        // ... as the version that called effects in the committer left them: no queue, no log, the
        // partial index of pending effects, and a failure recorded in its row
        db.execute("DROP TABLE " + QUEUE);
        db.execute("DROP TABLE " + SinkDatabase.TABLE + "_effect_log");
        db.execute("CREATE INDEX " + SinkDatabase.TABLE + "_pending_effects ON " + SinkDatabase.TABLE
                + " (effect_transaction) WHERE result IS NULL AND effect_transaction IS NOT NULL");
        db.execute("INSERT INTO " + SinkDatabase.TABLE + " (id, payload, source_topic, source_partition, source_offset,"
                + " effect_transaction, result) VALUES ('f1', '{\"from\":\"alice\",\"to\":\"bob\",\"amount\":10}',"
                + " 'payments', 0, 1, 'old-checkpoint-3', '{\"status\":\"failed\",\"sqlstate\":\"P0001\",\"error\":\"x\"}')");

        PostgresSinkConfig config = db.config(sink); // the upgrade's first start

        assertThat(db.failedEffects()).as("the failure waits in the queue for an operator").isOne();
        EffectActions actions = new EffectActions(config.connection(), config.tables(), config.writer(), "ledger");
        assertThat(actions.retryFailed(List.of("f1"), "fixed").done()).containsExactly("f1");
        SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered());
        assertThat(db.ledgerBalances()).containsOnly(entry("alice", 90), entry("bob", 10));
    }

    /**
     * The same migration, on the documented path for tables a DBA owns: the start cannot add
     * {@code failed_at} and is refused with "have the owner run ALTER TABLE ... ADD COLUMN IF NOT
     * EXISTS failed_at timestamptz; then start the job again". The owner runs exactly that; the next
     * start finds the column and never queues the failures the previous version recorded in the
     * events rows: they leave the gauge, the alert and the reach of retry-failed and skip.
     */
    @Test
    void aFailureOfThePreviousVersionIsQueuedAlsoWhenTheOwnerAddedTheColumnAsTold() throws Exception {
        db.createLedger("VALUES ('alice', 100), ('bob', 0)", BusinessEffectsTest.APPLY_PAYMENT);
        PostgresSinkBuilder sink = db.builder("ledger").setEffectFunction(FUNCTION);
        db.config(sink);
        // the previous version: no failed_at, a failure recorded (with its sink) in the events row only
        db.execute("ALTER TABLE " + QUEUE + " DROP COLUMN failed_at");
        db.execute("INSERT INTO " + SinkDatabase.TABLE + " (id, payload, source_topic, source_partition, source_offset,"
                + " effect_transaction, result) VALUES ('f1', '{\"from\":\"alice\",\"to\":\"bob\",\"amount\":10}',"
                + " 'payments', 0, 1, 'ledger-checkpoint-3',"
                + " '{\"status\":\"failed\",\"sqlstate\":\"P0001\",\"error\":\"x\",\"sink\":\"ledger\"}')");
        // what the refusal tells the table's owner to run, in one transaction
        db.execute(String.join(";\n", new PendingEffectsTable(SinkDatabase.TABLE).upgrade().addColumnStatements("failed_at")));

        db.config(sink); // the upgrade's start

        assertThat(db.failedEffects()).as("the failure waits in the queue for an operator").isOne();
    }

    /**
     * A failure stays queued, bound to the function that failed, until an operator acts. A team that
     * fixes the bug in a function of a new name (apply_payment_v2) and starts with it is refused,
     * because the binding check counts the failed rows as effects "queued for" the old function, and
     * told to "start with the function they were queued for until the queue drains": a failed effect
     * never drains (the workers pass it by). The refusal protects nothing either: retry-failed binds a
     * re-driven failure to the function the operator runs it with. Same for a sink renamed after a
     * failure (its failures are "queued by the sink" of the old prefix, for ever).
     */
    @Test
    void failuresWaitingForAnOperatorDoNotRefuseAStartWithTheFixedFunctionUnderANewName() throws Exception {
        db.createLedger("VALUES ('alice', 100), ('bob', 0)", BROKEN);
        PostgresSinkConfig config = db.config(db.builder("ledger").setEffectFunction(FUNCTION));
        db.commitFreshCheckpoint(config, event("s1", "{\"from\":\"alice\",\"to\":\"bob\",\"amount\":10,\"new-scheme\":true}"));
        SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered());
        assertThat(db.failedEffects()).isOne();
        db.execute(BusinessEffectsTest.APPLY_PAYMENT.replace(FUNCTION, FUNCTION + "_v2"));
        // what the refusal advises: run the old function until the queue drains; it never does
        assertThat(SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered())).isZero();
        assertThat(db.failedEffects()).isOne();

        assertThatCode(() -> db.config(db.builder("ledger").setEffectFunction(FUNCTION + "_v2")))
                .doesNotThrowAnyException();
    }
}
