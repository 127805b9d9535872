package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.options.PostgresTableOptions;
import static io.onceflow.sink.postgres.PostgresTwoPhaseCommitTest.checkpoint;
import static io.onceflow.sink.postgres.PostgresTwoPhaseCommitTest.commit;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.entry;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.onceflow.api.Event;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.ProtocolHooks;
import io.onceflow.sink.postgres.internal.PostgresCommittable;
import io.onceflow.sink.postgres.internal.PostgresSchema;
import io.onceflow.sink.postgres.internal.PostgresAtLeastOnceWriter;
import io.onceflow.sink.postgres.internal.PostgresExactlyOnceWriter;
import io.onceflow.testing.TestPostgres;
import io.onceflow.tools.effects.EffectActions;
import java.io.IOException;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The transactional inbox against a real server: a test ledger whose {@code apply_payment} moves
 * money between accounts, called once per message id from the queue that the checkpoint's
 * transaction fills with the id's row ({@code EffectBatch}, run here on the test's thread by {@link
 * SinkDatabase#drainEffects}; the workers that run it in a job are tested by {@link EffectWorkerTest}).
 * The balances are the oracle: a payment applied twice, or applied without its inbox row (or the
 * other way round), shows in them.
 */
class BusinessEffectsTest {
    static final String FUNCTION = "ledger.apply_payment";
    /** Rejects unknown accounts and overdrafts without changing anything; raises on a poison payload. */
    static final String APPLY_PAYMENT = "CREATE FUNCTION " + FUNCTION
            + "(message_id text, payload jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$\n"
            + "DECLARE amount numeric := (payload->>'amount')::numeric; debited int;\n"
            + "BEGIN\n"
            + "  IF payload ? 'poison' THEN RAISE EXCEPTION 'poison payment %', message_id; END IF;\n"
            + "  IF (SELECT count(*) FROM ledger.accounts WHERE id IN (payload->>'from', payload->>'to')) < 2 THEN\n"
            + "    RETURN jsonb_build_object('status', 'rejected', 'reason', 'unknown account');\n"
            + "  END IF;\n"
            + "  UPDATE ledger.accounts SET balance = balance - amount WHERE id = payload->>'from' AND balance >= amount;\n"
            + "  GET DIAGNOSTICS debited = ROW_COUNT;\n"
            + "  IF debited = 0 THEN RETURN jsonb_build_object('status', 'rejected', 'reason', 'insufficient funds');"
            + " END IF;\n"
            + "  UPDATE ledger.accounts SET balance = balance + amount WHERE id = payload->>'to';\n"
            + "  RETURN jsonb_build_object('status', 'applied', 'amount', amount);\n"
            + "END $$";
    private static final AtomicLong OFFSETS = new AtomicLong();
    private static final String APPLIED_10 = "{\"amount\": 10, \"status\": \"applied\"}";

    private final SinkDatabase db = new SinkDatabase();
    private PostgresSinkConfig config;

    @BeforeEach
    void createTheLedger() throws Exception {
        db.createLedger("VALUES ('alice', 100), ('bob', 0), ('carol', 0)", APPLY_PAYMENT);
        config = db.config(effectSink());
    }

    private PostgresSinkBuilder effectSink() {
        return db.builder("ledger").setEffectFunction(FUNCTION);
    }

    @Test
    void aPaymentIsAppliedOncePerIdAcrossACrashAfterPrepare() throws Exception {
        PostgresCommittable first;
        try (PostgresExactlyOnceWriter writer = db.freshWriter(config)) {
            first = checkpoint(writer, 1, payment("p1", "alice", "bob", 10));
            checkpoint(writer, 2, payment("p2", "alice", "bob", 20), payment("p3", "alice", "carol", 30));
        } // the task dies before checkpoint 2 completes: its transaction stays prepared
        commit(config, first);
        // checkpoint 2's transaction was prepared before p1 committed, and could hold earlier offsets:
        // p1 waits until the restore rolls it back
        assertThat(SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered())).isZero();

        // the restored writer's own effect worker may apply p1 once its barrier rolled checkpoint 2 back:
        // it counts into the same metrics as the drain below
        PostgresSinkMetrics metrics = PostgresSinkMetrics.unregistered();
        PostgresCommittable second;
        try (PostgresExactlyOnceWriter restored = new PostgresExactlyOnceWriter(config,
                db.attempt(0, 1, OptionalLong.of(1)), metrics)) {
            // the restarted job's first barrier: after every barrier of the crashed one
            second = checkpoint(restored, 3, payment("p2", "alice", "bob", 20), payment("p3", "alice", "carol", 30));
        }
        commit(config, second);
        SinkDatabase.drainEffects(config, metrics);

        assertThat(db.ledgerBalances()).containsExactlyInAnyOrderEntriesOf(Map.of("alice", 40, "bob", 30, "carol", 30));
        assertThat(db.deliveriesById()).containsExactlyInAnyOrderEntriesOf(Map.of("p1", 1, "p2", 1, "p3", 1));
        assertThat(db.effectStatuses()).containsOnly(entry("p1", "applied"), entry("p2", "applied"), entry("p3", "applied"));
        assertThat(metrics.effectsApplied.getCount()).isEqualTo(3);
        assertThat(db.prepared("ledger")).isEmpty();
    }

    @Test
    void theEffectIsInvisibleUntilCommitPrepared() throws Exception {
        PostgresCommittable committable;
        try (PostgresExactlyOnceWriter writer = db.freshWriter(config)) {
            committable = checkpoint(writer, 1, payment("p1", "alice", "bob", 10));

            assertThat(db.ledgerBalances()).as("prepared, not committed").containsEntry("alice", 100).containsEntry("bob", 0);
            assertThat(db.deliveriesById()).isEmpty();
            assertThat(db.prepared("ledger")).as("the effect is not in the prepared transaction: it locks no account")
                    .hasSize(1);
            try (Connection teller = db.database.connect(); Statement statement = teller.createStatement()) {
                statement.execute("SET lock_timeout = '1s'");
                statement.execute("UPDATE ledger.accounts SET balance = balance WHERE id IN ('alice', 'bob')");
            }

        }
        commit(config, committable);
        assertThat(db.queuedEffects()).as("committed with its inbox row").isEqualTo(1);
        assertThat(db.ledgerBalances()).as("applied by a worker, after the commit").containsEntry("alice", 100);
        SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered());
        assertThat(db.ledgerBalances()).containsEntry("alice", 90).containsEntry("bob", 10);
        assertThat(results()).containsExactly(entry("p1", APPLIED_10));
        assertThat(db.queuedEffects()).isZero();
    }

    @Test
    void aReplayOfCommittedRowsAfterARestoreRaisesDeliveriesAndRunsNoEffect() throws Exception {
        try (PostgresExactlyOnceWriter writer = db.freshWriter(config)) {
            commit(config, checkpoint(writer, 1, payment("p1", "alice", "bob", 10)));
            commit(config, checkpoint(writer, 2, payment("p2", "alice", "bob", 10)));
        }
        SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered());

        // resubmitted from a savepoint of checkpoint 1: p2 comes again, though its checkpoint was committed
        PostgresSinkConfig resubmitted = SinkDatabase.newRun(config);
        PostgresSinkMetrics metrics = PostgresSinkMetrics.unregistered();
        try (PostgresExactlyOnceWriter restored = new PostgresExactlyOnceWriter(resubmitted,
                db.attempt(0, 1, OptionalLong.of(1)), metrics)) {
            commit(resubmitted, metrics, checkpoint(restored, 2, payment("p2", "alice", "bob", 10)));
        }
        assertThat(SinkDatabase.drainEffects(resubmitted, metrics)).as("nothing queued").isZero();

        assertThat(db.deliveriesById()).containsExactlyInAnyOrderEntriesOf(Map.of("p1", 1, "p2", 2));
        assertThat(db.ledgerBalances()).containsEntry("alice", 80).containsEntry("bob", 20);
        assertThat(results()).containsEntry("p2", APPLIED_10);
        assertThat(metrics.effectsApplied.getCount()).isZero();
    }

    @Test
    void aDuplicateThatEscapedDedupNeverRunsTheEffectAgain() throws Exception {
        try (PostgresExactlyOnceWriter writer = db.freshWriter(config)) {
            writer.write(payment("p1", "alice", "bob", 10), null);
            writer.flush(false);
            // again in the same transaction, in a later batch
            commit(config, checkpoint(writer, 1, payment("p1", "alice", "bob", 10)));
            // its id expired from dedup: it comes back in a later checkpoint, with a different payload even
            commit(config, checkpoint(writer, 2, payment("p1", "alice", "bob", 50), payment("p2", "alice", "carol", 10)));
        }
        SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered()); // what the writer's worker left

        assertThat(db.deliveriesById()).containsExactlyInAnyOrderEntriesOf(Map.of("p1", 3, "p2", 1));
        assertThat(results()).containsEntry("p1", APPLIED_10);
        assertThat(db.ledgerBalances()).containsExactlyInAnyOrderEntriesOf(Map.of("alice", 80, "bob", 10, "carol", 10));
    }

    @Test
    void aRejectedPaymentIsRecordedAndChangesNothing() throws Exception {
        PostgresSinkMetrics metrics = PostgresSinkMetrics.unregistered();
        PostgresCommittable committable;
        try (PostgresExactlyOnceWriter writer = db.freshWriter(config)) {
            committable = checkpoint(writer, 1, payment("too-much", "alice", "bob", 1000),
                    payment("unknown", "alice", "mallory", 10), payment("fine", "alice", "bob", 10));
        }
        commit(config, committable);
        SinkDatabase.drainEffects(config, metrics);

        assertThat(results()).containsOnly(
                entry("too-much", "{\"reason\": \"insufficient funds\", \"status\": \"rejected\"}"),
                entry("unknown", "{\"reason\": \"unknown account\", \"status\": \"rejected\"}"),
                entry("fine", APPLIED_10));
        assertThat(db.ledgerBalances()).containsEntry("alice", 90).containsEntry("bob", 10);
        assertThat(metrics.effectsRejected.getCount()).isEqualTo(2);
        assertThat(metrics.effectsApplied.getCount()).isEqualTo(1);
        assertThat(db.rejects()).isEmpty();
    }

    @Test
    void aFunctionThatRaisesOnOneRowFailsThatRowAndTheJobGoesOn() throws Exception {
        PostgresSinkMetrics metrics = PostgresSinkMetrics.unregistered();
        PostgresCommittable first;
        PostgresCommittable second;
        try (PostgresExactlyOnceWriter writer = db.freshWriter(config)) {
            Event[] batch = new Event[7];
            for (int i = 0; i < batch.length; i++) {
                batch[i] = i == 3 ? poison("poison") : payment("p" + i, "alice", "bob", 10);
            }
            first = checkpoint(writer, 1, batch);
            second = checkpoint(writer, 2, payment("after", "alice", "carol", 10));
        }
        commit(config, first);
        commit(config, second);
        SinkDatabase.drainEffects(config, metrics);

        assertThat(results()).hasSize(8).containsEntry("poison",
                "{\"sink\": \"ledger\", \"error\": \"poison payment poison\", \"status\": \"failed\","
                        + " \"sqlstate\": \"P0001\"}");
        assertThat(db.effectStatuses()).containsEntry("p2", "applied").containsEntry("p4", "applied");
        assertThat(db.ledgerBalances()).containsExactlyInAnyOrderEntriesOf(Map.of("alice", 30, "bob", 60, "carol", 10));
        assertThat(db.deliveriesById()).containsEntry("poison", 1);
        assertThat(metrics.effectsFailed.getCount()).isEqualTo(1);
        assertThat(metrics.effectsApplied.getCount()).isEqualTo(7);
        assertThat(db.rejects()).isEmpty();
    }

    @Test
    void aLockTimeoutRollsTheWholeBatchBackAndMarksNothingFailed() throws Exception {
        PostgresSinkConfig impatient = db.config(effectSink().setLockTimeout(Duration.ofMillis(300)));
        db.commitFreshCheckpoint(impatient, payment("p1", "alice", "carol", 10), payment("p2", "alice", "bob", 10));
        try (Connection teller = db.database.connect(); Statement statement = teller.createStatement()) {
            teller.setAutoCommit(false);
            statement.execute("SELECT * FROM ledger.accounts WHERE id = 'bob' FOR UPDATE");

            assertThatThrownBy(() -> SinkDatabase.drainEffects(impatient, PostgresSinkMetrics.unregistered()))
                    .isInstanceOf(SQLException.class).hasFieldOrPropertyWithValue("SQLState", "55P03");
            teller.rollback();
        }
        assertThat(db.effectStatuses()).as("both effects still pending").containsOnly(entry("p1", null), entry("p2", null));
        assertThat(db.ledgerBalances()).containsExactlyInAnyOrderEntriesOf(Map.of("alice", 100, "bob", 0, "carol", 0));
        assertThat(db.queuedEffects()).isEqualTo(2);

        assertThat(SinkDatabase.drainEffects(impatient, PostgresSinkMetrics.unregistered())).isEqualTo(2);
        assertThat(db.ledgerBalances()).containsExactlyInAnyOrderEntriesOf(Map.of("alice", 80, "bob", 10, "carol", 10));
        assertThat(SinkDatabase.drainEffects(impatient, PostgresSinkMetrics.unregistered()))
                .as("a second drain calls nothing").isZero();
    }

    @Test
    void aStatementTimeoutIsNotTheMessagesFault() throws Exception {
        db.execute("CREATE FUNCTION ledger.slow(message_id text, payload jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$"
                + " BEGIN IF payload ? 'slow' THEN PERFORM pg_sleep(2); END IF;"
                + " RETURN ledger.apply_payment(message_id, payload); END $$");
        PostgresSinkConfig slow = db.config(db.builder("ledger").setEffectFunction("ledger.slow")
                .setStatementTimeout(Duration.ofMillis(500)));
        db.commitFreshCheckpoint(slow, payment("p1", "alice", "bob", 10), event("p2", "{\"from\":\"alice\",\"to\":\"bob\","
                + "\"amount\":10,\"slow\":true}"), payment("p3", "alice", "bob", 10));

        assertThatThrownBy(() -> SinkDatabase.drainEffects(slow, PostgresSinkMetrics.unregistered()))
                .isInstanceOf(SQLException.class).hasFieldOrPropertyWithValue("SQLState", "57014");
        assertThat(db.effectStatuses()).as("none failed, none applied: 57014 says nothing about p2")
                .containsOnly(entry("p1", null), entry("p2", null), entry("p3", null));
        assertThat(db.ledgerBalances()).containsEntry("alice", 100);

        db.execute("CREATE OR REPLACE FUNCTION ledger.slow(message_id text, payload jsonb) RETURNS jsonb"
                + " LANGUAGE sql AS $$ SELECT ledger.apply_payment(message_id, payload) $$");
        assertThat(SinkDatabase.drainEffects(slow, PostgresSinkMetrics.unregistered())).isEqualTo(3);
        assertThat(db.effectStatuses().values()).containsOnly("applied");
        assertThat(db.ledgerBalances()).containsEntry("alice", 70).containsEntry("bob", 30);
    }

    @Test
    void effectsRunInSourceOrderNotIdOrder() throws Exception {
        // alice has 100: whichever payment comes first in the source is applied, the other is short of funds
        db.commitFreshCheckpoint(config, payment("z-first", "alice", "bob", 70), payment("a-second", "alice", "carol", 50));
        SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered());

        assertThat(db.effectStatuses()).containsOnly(entry("z-first", "applied"), entry("a-second", "rejected"));
        assertThat(db.ledgerBalances()).containsExactlyInAnyOrderEntriesOf(Map.of("alice", 30, "bob", 70, "carol", 0));
    }

    @Test
    void effectsQueuedByACommittedTransactionAreAppliedWhateverHappensToItsCommitter() throws Exception {
        PostgresSinkConfig crashingCommitter = config.withHook((step, transaction) -> {
            if (step == ProtocolHooks.Step.AFTER_COMMIT) {
                throw new IOException("injected crash right after COMMIT PREPARED");
            }
        });
        PostgresCommittable committable;
        try (PostgresExactlyOnceWriter writer = db.freshWriter(config)) {
            committable = checkpoint(writer, 1, payment("p1", "alice", "bob", 10));
        }
        assertThatThrownBy(() -> commit(crashingCommitter, committable)).hasMessageContaining("injected crash");
        assertThat(db.effectStatuses()).containsOnly(entry("p1", null));
        assertThat(db.queuedEffects()).isOne();

        assertThat(SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered())).isOne();
        assertThat(db.ledgerBalances()).containsEntry("alice", 90).containsEntry("bob", 10);
    }

    @Test
    void twoWorkersDrainingOneQueueApplyEachEffectOnce() throws Exception {
        Event[] payments = new Event[400];
        for (int i = 0; i < payments.length; i++) {
            payments[i] = payment("p" + i, "alice", "bob", 0.25);
        }
        db.commitFreshCheckpoint(config, payments);
        PostgresSinkConfig smallBatches = db.config(effectSink().setBatchSize(7));
        // a zombie's worker and its successor's, at once
        CompletableFuture<Integer> first = CompletableFuture.supplyAsync(() -> drainUnchecked(smallBatches));
        CompletableFuture<Integer> second = CompletableFuture.supplyAsync(() -> drainUnchecked(smallBatches));

        assertThat(first.get(60, TimeUnit.SECONDS) + second.get(60, TimeUnit.SECONDS)).isEqualTo(400);
        assertThat(db.ledgerBalances()).containsEntry("alice", 0).containsEntry("bob", 100);
        assertThat(db.effectStatuses()).hasSize(400).allSatisfy((id, status) -> assertThat(status).isEqualTo("applied"));
    }

    @Test
    void aFailedEffectIsRedrivenOnceAfterTheCauseIsFixed() throws Exception {
        db.commitFreshCheckpoint(config, poison("poison"), payment("p1", "alice", "bob", 10));
        SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered());
        assertThat(db.effectStatuses()).containsOnly(entry("poison", "failed"), entry("p1", "applied"));

        db.execute("CREATE OR REPLACE FUNCTION " + FUNCTION + "(message_id text, payload jsonb) RETURNS jsonb"
                + " LANGUAGE sql AS $$ UPDATE ledger.accounts SET balance = balance + 1 WHERE id = 'carol'"
                + " RETURNING jsonb_build_object('status', 'applied', 'amount', 1) $$");
        assertThat(requeueFailed(null)).containsExactly("poison");
        assertThat(requeueFailed(null)).as("nothing failed any more").isEmpty();
        assertThat(SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered())).isOne();
        assertThat(SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered())).isZero();

        assertThat(db.effectStatuses()).containsOnly(entry("poison", "applied"), entry("p1", "applied"));
        assertThat(db.ledgerBalances()).containsExactlyInAnyOrderEntriesOf(Map.of("alice", 90, "bob", 10, "carol", 1));
        assertThat(requeueFailed(new String[] {"p1"})).as("an applied effect is never queued again").isEmpty();
    }

    private List<String> requeueFailed(String[] ids) throws SQLException {
        return new EffectActions(config.connection(), config.tables(), config.writer(), config.sinkPrefix())
                .retryFailed(ids == null ? List.of() : List.of(ids), null).done();
    }

    @Test
    void aFunctionErrorOutsideTheDataClassesOnOneRowFailsOnlyThatRow() throws Exception {
        db.execute("CREATE OR REPLACE FUNCTION ledger.picky(message_id text, payload jsonb) RETURNS jsonb"
                + " LANGUAGE plpgsql AS $$ BEGIN\n"
                + "  IF payload ? 'twice' THEN PERFORM (SELECT n FROM generate_series(1, 2) n); END IF;\n"
                + "  RETURN jsonb_build_object('status', 'applied'); END $$");
        PostgresSinkConfig picky = db.config(db.builder("ledger").setEffectFunction("ledger.picky"));
        db.commitFreshCheckpoint(picky, event("a", "{}"), event("b", "{\"twice\":true}"), event("c", "{}"));
        SinkDatabase.drainEffects(picky, PostgresSinkMetrics.unregistered());
        assertThat(db.effectStatuses()).containsOnly(entry("a", "applied"), entry("b", "failed"), entry("c", "applied"));
        assertThat(results().get("b")).contains("21000");
    }

    @Test
    void aTriggerThatSwallowsTheResultFailsLoudlyInsteadOfRepeatingTheEffect() throws Exception {
        db.commitFreshCheckpoint(config, payment("p1", "alice", "bob", 10));
        // added after the writer's start, which refuses triggers (BarrierLockChecks): only the effect sees it
        db.execute("CREATE FUNCTION swallow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$");
        db.execute("CREATE TRIGGER swallow BEFORE UPDATE ON " + SinkDatabase.TABLE
                + " FOR EACH ROW EXECUTE FUNCTION swallow()");

        assertThatThrownBy(() -> SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered()))
                .hasMessageContaining("a trigger or a row-level security");
        assertThat(db.queuedEffects()).as("tried again, never marked failed").isOne();
        assertThat(db.ledgerBalances()).as("the call was rolled back, not repeated").containsEntry("alice", 100);
    }

    private int drainUnchecked(PostgresSinkConfig sink) {
        try {
            return SinkDatabase.drainEffects(sink, PostgresSinkMetrics.unregistered());
        } catch (SQLException e) {
            throw new IllegalStateException(e);
        }
    }

    @Test
    void anEventsTableFromBeforeEffectsGetsItsResultColumnAtStart() throws Exception {
        SinkDatabase old = databaseFromBeforeEffects();
        old.execute("INSERT INTO " + SinkDatabase.TABLE + " (id, payload) VALUES ('before', '{}')");
        PostgresSinkConfig withEffect = SinkDatabase.config(old.builder("upgraded").setEffectFunction("noop"));

        PostgresCommittable committable;
        try (PostgresExactlyOnceWriter writer = old.freshWriter(withEffect)) {
            committable = checkpoint(writer, 1, "after");
        }
        commit(withEffect, committable);
        SinkDatabase.drainEffects(withEffect, PostgresSinkMetrics.unregistered());
        Map<String, String> results = new HashMap<>();
        old.query("SELECT id, result::text FROM " + SinkDatabase.TABLE, row -> results.put(row.getString(1),
                row.getString(2)));
        assertThat(results).containsOnly(entry("before", null), entry("after", "{\"status\": \"applied\"}"));
    }

    @Test
    void aRoleThatMayNotAddTheResultColumnIsToldTheStatement() throws Exception {
        assumeTrue(TestPostgres.shared().canRestart(), "creates a role that logs in without a password: embedded only");
        SinkDatabase old = databaseFromBeforeEffects();
        String role = "writer_" + Long.toHexString(System.nanoTime());
        old.execute("CREATE ROLE " + role + " LOGIN");
        old.execute("GRANT ALL ON ALL TABLES IN SCHEMA public TO " + role);

        assertThatThrownBy(() -> SinkDatabase.config(old.builderAs("upgraded", role).setEffectFunction("noop")))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("the table onceflow_events has no result column, which the effect function"
                        + " (postgres.effect.function) needs")
                .hasMessageContaining("the user may not alter it")
                .hasMessageContaining("ALTER TABLE onceflow_events ADD COLUMN IF NOT EXISTS result jsonb");
    }

    /**
     * A database whose tables an older onceflow created (the events table has no result column),
     * and an effect {@code noop} that applies everything.
     */
    private static SinkDatabase databaseFromBeforeEffects() throws SQLException {
        SinkDatabase old = new SinkDatabase();
        old.execute(new PostgresSchema(SinkDatabase.TABLE, PostgresTableOptions.DEFAULT_REJECTS,
                PostgresTableOptions.DEFAULT_COMMIT_LOG, PostgresTableOptions.DEFAULT_RUNS,
                PostgresTableOptions.DEFAULT_WRITERS).ddl().replace(",\n    result jsonb,\n    effect_transaction text", "")
                .replaceAll("CREATE INDEX[^;]*;", ""));
        old.execute("CREATE FUNCTION noop(message_id text, payload jsonb) RETURNS jsonb LANGUAGE sql"
                + " AS $$ SELECT '{\"status\": \"applied\"}'::jsonb $$");
        return old;
    }

    @Test
    void aMissingFunctionIsRefusedAtStartWithATemplate() {
        assertThatThrownBy(() -> db.config(db.builder("ledger").setEffectFunction("ledger.apply_refund")))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageStartingWith("the effect function (postgres.effect.function) ledger.apply_refund(text, jsonb)"
                        + " does not exist: create it with the parameters (message_id text, payload jsonb), e.g."
                        + " CREATE FUNCTION ledger.apply_refund(message_id text, payload jsonb) RETURNS jsonb");
    }

    @Test
    void aFunctionWithAnotherSignatureIsRefusedNamingWhatExists() throws Exception {
        db.execute("CREATE FUNCTION ledger.by_number(id bigint) RETURNS jsonb LANGUAGE sql AS $$ SELECT '{}'::jsonb $$");
        db.execute("CREATE FUNCTION ledger.as_text(id text, payload jsonb) RETURNS text LANGUAGE sql AS $$ SELECT '' $$");

        assertThatThrownBy(() -> db.config(db.builder("ledger").setEffectFunction("ledger.by_number")))
                .hasMessageContaining("ledger.by_number(text, jsonb) does not exist (there is ledger.by_number(bigint))");
        assertThatThrownBy(() -> db.config(db.builder("ledger").setEffectFunction("ledger.as_text")))
                .hasMessageContaining("ledger.as_text(text, jsonb) returns text, not jsonb")
                .hasMessageContaining("DROP FUNCTION ledger.as_text(text, jsonb)");
    }

    @Test
    void theWriterChecksTheFunctionToo() throws Exception {
        db.execute("DROP FUNCTION " + FUNCTION);

        assertThatThrownBy(() -> db.freshWriter(config))
                .isInstanceOf(IOException.class)
                .hasMessageContaining("could not start: the effect function (postgres.effect.function)"
                        + " ledger.apply_payment(text, jsonb) does not exist");
        assertThatThrownBy(() -> new PostgresAtLeastOnceWriter(config, 0, 1, PostgresSinkMetrics.unregistered()))
                .hasMessageContaining("could not start: the effect function");
    }

    static Event payment(String id, String from, String to, double amount) {
        return event(id, "{\"from\":\"" + from + "\",\"to\":\"" + to + "\",\"amount\":"
                + BigDecimal.valueOf(amount).stripTrailingZeros().toPlainString() + "}");
    }

    private static Event poison(String id) {
        return event(id, "{\"poison\":true}");
    }

    /** In partition 0, at the next offset: the order events are made in is their source order. */
    static Event event(String id, String payload) {
        return new Event(id, payload.getBytes(StandardCharsets.UTF_8), "payments", 0, OFFSETS.incrementAndGet(), 0L,
                new HashMap<>());
    }

    /** The result of each committed row, as jsonb prints it. */
    private Map<String, String> results() throws SQLException {
        Map<String, String> results = new HashMap<>();
        db.query("SELECT id, result::text FROM " + SinkDatabase.TABLE,
                row -> results.put(row.getString(1), row.getString(2)));
        return results;
    }
}
