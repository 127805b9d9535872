package io.onceflow.sink.postgres;

import static io.onceflow.sink.postgres.PostgresTwoPhaseCommitTest.checkpoint;
import static io.onceflow.sink.postgres.PostgresTwoPhaseCommitTest.commit;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.entry;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.onceflow.api.Event;
import io.onceflow.sink.postgres.RecordingCommitRequest.Outcome;
import io.onceflow.sink.postgres.internal.PostgresConnections;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.ProtocolHooks;
import io.onceflow.sink.postgres.internal.commit.PendingEffects;
import io.onceflow.sink.postgres.internal.commit.PostgresCommittable;
import io.onceflow.sink.postgres.internal.commit.PostgresCommitter;
import io.onceflow.sink.postgres.internal.schema.PostgresSchema;
import io.onceflow.sink.postgres.internal.writer.PostgresAtLeastOnceWriter;
import io.onceflow.sink.postgres.internal.writer.PostgresExactlyOnceWriter;
import io.onceflow.testing.Eventually;
import io.onceflow.testing.TestPostgres;
import java.io.IOException;
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
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The transactional inbox against a real server: a test ledger whose {@code apply_payment} moves
 * money between accounts, called by the sink once per message id: by the exactly-once sink's
 * committer right after the checkpoint's transaction committed the id's row ({@link PendingEffects}),
 * by the at-least-once sink in the batch's transaction. The balances are the oracle: a payment
 * applied twice, or applied without its inbox row (or the other way round), shows in them.
 */
class BusinessEffectsTest {
    private static final String FUNCTION = "ledger.apply_payment";
    /** Rejects unknown accounts and overdrafts without changing anything; raises on a poison payload. */
    private static final String APPLY_PAYMENT = "CREATE FUNCTION " + FUNCTION
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
    private static final String APPLIED_10 = "{\"amount\": 10, \"status\": \"applied\"}";

    private final SinkDatabase db = new SinkDatabase();
    private PostgresSinkConfig config;

    @BeforeEach
    void createTheLedger() throws Exception {
        db.execute("CREATE SCHEMA ledger");
        db.execute("CREATE TABLE ledger.accounts (id text PRIMARY KEY,"
                + " balance numeric(18,2) NOT NULL CHECK (balance >= 0))");
        db.execute("INSERT INTO ledger.accounts VALUES ('alice', 100), ('bob', 0), ('carol', 0)");
        db.execute(APPLY_PAYMENT);
        config = db.config(effectSink());
    }

    private PostgresSinkBuilder effectSink() {
        return db.builder("ledger").setEffectFunction(FUNCTION);
    }

    @Test
    void aPaymentIsAppliedOncePerIdAcrossACrashAfterPrepare() throws Exception {
        try (PostgresExactlyOnceWriter writer = db.freshWriter(config)) {
            commit(config, checkpoint(writer, 1, payment("p1", "alice", "bob", 10)));
            checkpoint(writer, 2, payment("p2", "alice", "bob", 20), payment("p3", "alice", "carol", 30));
        } // the task dies before checkpoint 2 completes: its transaction stays prepared

        PostgresSinkMetrics metrics = PostgresSinkMetrics.unregistered();
        try (PostgresExactlyOnceWriter restored = new PostgresExactlyOnceWriter(config,
                db.attempt(0, 1, OptionalLong.of(1)), PostgresSinkMetrics.unregistered())) {
            commit(config, metrics, checkpoint(restored, 2, payment("p2", "alice", "bob", 20),
                    payment("p3", "alice", "carol", 30)));
        }

        assertThat(balances()).containsExactlyInAnyOrderEntriesOf(Map.of("alice", 40, "bob", 30, "carol", 30));
        assertThat(db.deliveriesById()).containsExactlyInAnyOrderEntriesOf(Map.of("p1", 1, "p2", 1, "p3", 1));
        assertThat(statuses()).containsOnly(entry("p1", "applied"), entry("p2", "applied"), entry("p3", "applied"));
        assertThat(metrics.effectsApplied.getCount()).isEqualTo(2);
        assertThat(db.prepared("ledger")).isEmpty();
    }

    @Test
    void theEffectIsInvisibleUntilCommitPrepared() throws Exception {
        try (PostgresExactlyOnceWriter writer = db.freshWriter(config)) {
            PostgresCommittable committable = checkpoint(writer, 1, payment("p1", "alice", "bob", 10));

            assertThat(balances()).as("prepared, not committed").containsEntry("alice", 100).containsEntry("bob", 0);
            assertThat(db.deliveriesById()).isEmpty();
            assertThat(db.prepared("ledger")).as("the effect is not in the prepared transaction: it locks no account")
                    .hasSize(1);
            try (Connection teller = db.database.connect(); Statement statement = teller.createStatement()) {
                statement.execute("SET lock_timeout = '1s'");
                statement.execute("UPDATE ledger.accounts SET balance = balance WHERE id IN ('alice', 'bob')");
            }

            commit(config, committable);
        }
        assertThat(balances()).containsEntry("alice", 90).containsEntry("bob", 10);
        assertThat(results()).containsExactly(entry("p1", APPLIED_10));
    }

    @Test
    void aReplayOfCommittedRowsAfterARestoreRaisesDeliveriesAndRunsNoEffect() throws Exception {
        try (PostgresExactlyOnceWriter writer = db.freshWriter(config)) {
            commit(config, checkpoint(writer, 1, payment("p1", "alice", "bob", 10)));
            commit(config, checkpoint(writer, 2, payment("p2", "alice", "bob", 10)));
        }

        // resubmitted from a savepoint of checkpoint 1: p2 comes again, though its checkpoint was committed
        PostgresSinkConfig resubmitted = SinkDatabase.newRun(config);
        PostgresSinkMetrics metrics = PostgresSinkMetrics.unregistered();
        try (PostgresExactlyOnceWriter restored = new PostgresExactlyOnceWriter(resubmitted,
                db.attempt(0, 1, OptionalLong.of(1)), metrics)) {
            commit(resubmitted, metrics, checkpoint(restored, 2, payment("p2", "alice", "bob", 10)));
        }

        assertThat(db.deliveriesById()).containsExactlyInAnyOrderEntriesOf(Map.of("p1", 1, "p2", 2));
        assertThat(balances()).containsEntry("alice", 80).containsEntry("bob", 20);
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

        assertThat(db.deliveriesById()).containsExactlyInAnyOrderEntriesOf(Map.of("p1", 3, "p2", 1));
        assertThat(results()).containsEntry("p1", APPLIED_10);
        assertThat(balances()).containsExactlyInAnyOrderEntriesOf(Map.of("alice", 80, "bob", 10, "carol", 10));
    }

    @Test
    void aRejectedPaymentIsRecordedAndChangesNothing() throws Exception {
        PostgresSinkMetrics metrics = PostgresSinkMetrics.unregistered();
        try (PostgresExactlyOnceWriter writer = new PostgresExactlyOnceWriter(config,
                db.attempt(0, 1, OptionalLong.empty()), metrics)) {
            commit(config, metrics, checkpoint(writer, 1, payment("too-much", "alice", "bob", 1000),
                    payment("unknown", "alice", "mallory", 10), payment("fine", "alice", "bob", 10)));
        }

        assertThat(results()).containsOnly(
                entry("too-much", "{\"reason\": \"insufficient funds\", \"status\": \"rejected\"}"),
                entry("unknown", "{\"reason\": \"unknown account\", \"status\": \"rejected\"}"),
                entry("fine", APPLIED_10));
        assertThat(balances()).containsEntry("alice", 90).containsEntry("bob", 10);
        assertThat(metrics.effectsRejected.getCount()).isEqualTo(2);
        assertThat(metrics.effectsApplied.getCount()).isEqualTo(1);
        assertThat(db.rejects()).isEmpty();
    }

    @Test
    void aFunctionThatRaisesOnOneRowFailsThatRowAndTheJobGoesOn() throws Exception {
        PostgresSinkMetrics metrics = PostgresSinkMetrics.unregistered();
        try (PostgresExactlyOnceWriter writer = new PostgresExactlyOnceWriter(config,
                db.attempt(0, 1, OptionalLong.empty()), metrics)) {
            Event[] batch = new Event[7];
            for (int i = 0; i < batch.length; i++) {
                batch[i] = i == 3 ? poison("poison") : payment("p" + i, "alice", "bob", 10);
            }
            commit(config, metrics, checkpoint(writer, 1, batch));
            commit(config, metrics, checkpoint(writer, 2, payment("after", "alice", "carol", 10)));
        }

        assertThat(results()).hasSize(8).containsEntry("poison",
                "{\"error\": \"poison payment poison\", \"status\": \"failed\", \"sqlstate\": \"P0001\"}");
        assertThat(statuses()).containsEntry("p2", "applied").containsEntry("p4", "applied");
        assertThat(balances()).containsExactlyInAnyOrderEntriesOf(Map.of("alice", 30, "bob", 60, "carol", 10));
        assertThat(db.deliveriesById()).containsEntry("poison", 1);
        assertThat(metrics.effectsFailed.getCount()).isEqualTo(1);
        assertThat(metrics.effectsApplied.getCount()).isEqualTo(7);
        assertThat(db.rejects()).isEmpty();
    }

    @Test
    void aTransientErrorIsRetriedWithNothingHalfApplied() throws Exception {
        PostgresSinkConfig impatient = db.config(effectSink().setLockTimeout(Duration.ofMillis(300)));
        PostgresCommittable committable;
        try (PostgresExactlyOnceWriter writer = db.freshWriter(impatient)) {
            committable = checkpoint(writer, 1, payment("p1", "alice", "carol", 10), payment("p2", "alice", "bob", 10));
        }
        try (Connection teller = db.database.connect(); Statement statement = teller.createStatement()) {
            teller.setAutoCommit(false);
            statement.execute("SELECT * FROM ledger.accounts WHERE id = 'bob' FOR UPDATE");

            assertThat(commit(impatient, committable)).extracting(request -> request.outcome)
                    .as("the lock timeout in the effect is retried, not a failure").containsExactly(Outcome.RETRY_LATER);
            teller.rollback();
        }
        assertThat(db.deliveriesById()).as("the inbox rows committed").containsOnlyKeys("p1", "p2");
        assertThat(statuses()).as("both effects still pending").containsOnly(entry("p1", null), entry("p2", null));
        assertThat(balances()).containsExactlyInAnyOrderEntriesOf(Map.of("alice", 100, "bob", 0, "carol", 0));

        assertThat(commit(impatient, committable)).extracting(request -> request.outcome)
                .as("the retry finds the transaction committed and calls the pending effects")
                .containsExactly(Outcome.ALREADY_COMMITTED);
        assertThat(balances()).containsExactlyInAnyOrderEntriesOf(Map.of("alice", 80, "bob", 10, "carol", 10));
        assertThat(commit(impatient, committable)).extracting(request -> request.outcome)
                .containsExactly(Outcome.ALREADY_COMMITTED);
        assertThat(balances()).as("a third commit calls nothing").containsEntry("alice", 80);
    }

    @Test
    void effectsLeftPendingByACrashAfterTheCommitAreCalledWhenAWriterStarts() throws Exception {
        ProtocolHooks.install((step, transaction) -> {
            if (step == ProtocolHooks.Step.AFTER_COMMIT) {
                throw new IOException("injected crash between COMMIT PREPARED and the effects");
            }
        });
        try (PostgresExactlyOnceWriter writer = db.freshWriter(config)) {
            PostgresCommittable committable = checkpoint(writer, 1, payment("p1", "alice", "bob", 10));
            assertThatThrownBy(() -> commit(config, committable)).hasMessageContaining("injected crash");
        } finally {
            ProtocolHooks.reset();
        }
        assertThat(statuses()).containsOnly(entry("p1", null));

        // a start that no longer restores the committable (e.g. a later checkpoint): the writer calls it
        try (PostgresExactlyOnceWriter restarted = new PostgresExactlyOnceWriter(config,
                db.attempt(0, 1, OptionalLong.of(1)), PostgresSinkMetrics.unregistered())) {
            assertThat(statuses()).containsOnly(entry("p1", "applied"));
        }
        assertThat(balances()).containsEntry("alice", 90).containsEntry("bob", 10);
    }

    @Test
    void twoCommittersOfOneTransactionCallEachEffectOnce() throws Exception {
        PostgresCommittable committable;
        try (PostgresExactlyOnceWriter writer = db.freshWriter(config)) {
            Event[] payments = new Event[40];
            for (int i = 0; i < payments.length; i++) {
                payments[i] = payment("p" + i, "alice", "bob", 1);
            }
            committable = checkpoint(writer, 1, payments);
        }
        // a zombie's committer and its successor's, at once
        CompletableFuture<?> first = CompletableFuture.runAsync(() -> commitUnchecked(committable));
        CompletableFuture<?> second = CompletableFuture.runAsync(() -> commitUnchecked(committable));
        CompletableFuture.allOf(first, second).get(30, TimeUnit.SECONDS);

        assertThat(balances()).containsEntry("alice", 60).containsEntry("bob", 40);
        assertThat(statuses()).hasSize(40).allSatisfy((id, status) -> assertThat(status).isEqualTo("applied"));
    }

    @Test
    void committersOfTwoSubtasksChangingTheSameAccountsNeitherDeadlockNorRetry() throws Exception {
        db.execute("INSERT INTO ledger.accounts SELECT 'a' || n, 1000 FROM generate_series(0, 19) n");
        PostgresCommittable[] committables = new PostgresCommittable[2];
        for (int subtask = 0; subtask < 2; subtask++) {
            try (PostgresExactlyOnceWriter writer = new PostgresExactlyOnceWriter(config,
                    db.attempt(subtask, 2, OptionalLong.empty()), PostgresSinkMetrics.unregistered())) {
                Event[] payments = new Event[300];
                for (int i = 0; i < payments.length; i++) {
                    // opposite orders of the same accounts in the two subtasks: the classic deadlock
                    int from = subtask == 0 ? i % 20 : 19 - i % 20;
                    payments[i] = payment("s" + subtask + "-" + i, "a" + from, "a" + (19 - from), 1);
                }
                committables[subtask] = checkpoint(writer, 1, payments);
            }
        }
        PostgresSinkConfig smallBatches = db.config(effectSink().setBatchSize(20));
        CompletableFuture<List<RecordingCommitRequest>> first = CompletableFuture.supplyAsync(
                () -> commitUnchecked(smallBatches, committables[0]));
        CompletableFuture<List<RecordingCommitRequest>> second = CompletableFuture.supplyAsync(
                () -> commitUnchecked(smallBatches, committables[1]));

        assertThat(first.get(60, TimeUnit.SECONDS)).extracting(r -> r.outcome).containsExactly(Outcome.COMMITTED);
        assertThat(second.get(60, TimeUnit.SECONDS)).extracting(r -> r.outcome).containsExactly(Outcome.COMMITTED);
        assertThat(statuses().values()).hasSize(600).containsOnly("applied");
    }

    @Test
    void aPausedCommitterHoldingEffectsDoesNotStallItsSuccessor() throws Exception {
        PostgresCommittable committable;
        try (PostgresExactlyOnceWriter writer = db.freshWriter(config)) {
            committable = checkpoint(writer, 1, payment("p1", "alice", "bob", 10));
        }
        // the zombie: a committer session that locked the effects and then went silent (SIGSTOP)
        try (Connection zombie = PostgresConnections.open(config, "committer");
                Statement statement = zombie.createStatement()) {
            statement.execute("SET idle_in_transaction_session_timeout = "
                    + PostgresCommitter.EFFECT_IDLE_LIMIT.toMillis());
            zombie.setAutoCommit(false);
            statement.execute("SELECT pg_advisory_xact_lock(hashtext('onceflow effects of ' || '"
                    + SinkDatabase.TABLE + "'))");
            statement.execute("SELECT * FROM " + SinkDatabase.TABLE + " FOR UPDATE");

            // Flink's committer tries again at once, sink.committer.retries (10) times
            Outcome outcome = Outcome.RETRY_LATER;
            for (int attempt = 0; attempt <= 10 && outcome == Outcome.RETRY_LATER; attempt++) {
                outcome = commit(config, committable).get(0).outcome;
            }
            assertThat(outcome).as("the server ends the silent session; its successor goes on")
                    .isIn(Outcome.COMMITTED, Outcome.ALREADY_COMMITTED);
        }
        assertThat(statuses()).containsOnly(entry("p1", "applied"));
        assertThat(balances()).containsEntry("alice", 90);
    }

    @Test
    void aFunctionErrorOutsideTheDataClassesOnOneRowFailsOnlyThatRow() throws Exception {
        db.execute("CREATE OR REPLACE FUNCTION ledger.picky(message_id text, payload jsonb) RETURNS jsonb"
                + " LANGUAGE plpgsql AS $$ BEGIN\n"
                + "  IF payload ? 'twice' THEN PERFORM (SELECT n FROM generate_series(1, 2) n); END IF;\n"
                + "  RETURN jsonb_build_object('status', 'applied'); END $$");
        PostgresSinkConfig picky = db.config(db.builder("ledger").setEffectFunction("ledger.picky"));
        try (PostgresExactlyOnceWriter writer = db.freshWriter(picky)) {
            commit(picky, checkpoint(writer, 1, event("a", "{}"), event("b", "{\"twice\":true}"), event("c", "{}")));
        }
        assertThat(statuses()).containsOnly(entry("a", "applied"), entry("b", "failed"), entry("c", "applied"));
        assertThat(results().get("b")).contains("21000");
    }

    @Test
    void aTriggerThatSwallowsTheResultFailsLoudlyInsteadOfRepeatingTheEffect() throws Exception {
        db.execute("CREATE FUNCTION swallow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$");
        db.execute("CREATE TRIGGER swallow BEFORE UPDATE ON " + SinkDatabase.TABLE
                + " FOR EACH ROW EXECUTE FUNCTION swallow()");
        PostgresCommittable committable;
        try (PostgresExactlyOnceWriter writer = db.freshWriter(config)) {
            committable = checkpoint(writer, 1, payment("p1", "alice", "bob", 10));
        }

        assertThatThrownBy(() -> commit(config, committable)).rootCause()
                .hasMessageContaining("a trigger or a row-level security");
        assertThat(balances()).as("the call was rolled back, not repeated").containsEntry("alice", 100);
    }

    private List<RecordingCommitRequest> commitUnchecked(PostgresSinkConfig sink, PostgresCommittable committable) {
        try {
            return commit(sink, committable);
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    private void commitUnchecked(PostgresCommittable committable) {
        try {
            commit(config, committable);
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    @Test
    void atLeastOnceCommitsEachInboxRowTogetherWithItsEffect() throws Exception {
        assumeTrue(TestPostgres.shared().canRestart(), "ends the writer's session: embedded server only");
        PostgresSinkMetrics metrics = PostgresSinkMetrics.unregistered();
        try (Connection teller = db.database.connect(); Statement statement = teller.createStatement()) {
            teller.setAutoCommit(false);
            statement.execute("SELECT * FROM ledger.accounts WHERE id = 'bob' FOR UPDATE");
            try (PostgresAtLeastOnceWriter writer = new PostgresAtLeastOnceWriter(config, 0, metrics)) {
                writer.write(payment("p1", "alice", "carol", 10), null);
                writer.write(payment("p2", "alice", "bob", 10), null);
                CompletableFuture<Void> flushed = CompletableFuture.runAsync(() -> {
                    try {
                        writer.flush(false);
                    } catch (IOException e) {
                        throw new IllegalStateException(e);
                    }
                });
                // the batch has inserted its inbox rows and applied p1, and waits to credit bob: the task dies
                int writerPid = waitForTheWriterToWaitForALock();
                statement.execute("SELECT pg_terminate_backend(" + writerPid + ")");
                assertThatThrownBy(() -> flushed.get(20, TimeUnit.SECONDS)).hasMessageContaining("could not write a batch");
            }
            teller.rollback();
        }
        assertThat(db.deliveriesById()).as("no inbox row without its effect").isEmpty();
        assertThat(balances()).containsExactlyInAnyOrderEntriesOf(Map.of("alice", 100, "bob", 0, "carol", 0));

        for (int replay = 0; replay < 2; replay++) { // Flink's restart, and another one
            try (PostgresAtLeastOnceWriter writer = new PostgresAtLeastOnceWriter(config, 0, metrics)) {
                writer.write(payment("p1", "alice", "carol", 10), null);
                writer.write(payment("p2", "alice", "bob", 10), null);
                writer.flush(true);
            }
        }
        assertThat(db.deliveriesById()).containsExactlyInAnyOrderEntriesOf(Map.of("p1", 2, "p2", 2));
        assertThat(balances()).containsExactlyInAnyOrderEntriesOf(Map.of("alice", 80, "bob", 10, "carol", 10));
        assertThat(statuses()).containsOnly(entry("p1", "applied"), entry("p2", "applied"));
        assertThat(metrics.effectsApplied.getCount()).as("the killed batch's calls never completed").isEqualTo(2);
    }

    private int waitForTheWriterToWaitForALock() throws Exception {
        AtomicInteger pid = new AtomicInteger();
        Eventually.await("the writer waits for the lock on bob's account", Duration.ofSeconds(20),
                Duration.ofMillis(20), () -> {
                    db.query("SELECT pid FROM pg_stat_activity WHERE application_name = 'onceflow-ledger-writer-0'"
                            + " AND wait_event_type = 'Lock'", row -> pid.set(row.getInt(1)));
                    return pid.get() != 0;
                });
        return pid.get();
    }

    @Test
    void anEventsTableFromBeforeEffectsGetsItsResultColumnAtStart() throws Exception {
        SinkDatabase old = databaseFromBeforeEffects();
        old.execute("INSERT INTO " + SinkDatabase.TABLE + " (id, payload) VALUES ('before', '{}')");
        PostgresSinkConfig withEffect = SinkDatabase.config(old.builder("upgraded").setEffectFunction("noop"));

        try (PostgresExactlyOnceWriter writer = old.freshWriter(withEffect)) {
            commit(withEffect, checkpoint(writer, 1, "after"));
        }
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
        assertThatThrownBy(() -> new PostgresAtLeastOnceWriter(config, 0, PostgresSinkMetrics.unregistered()))
                .hasMessageContaining("could not start: the effect function");
    }

    private static Event payment(String id, String from, String to, int amount) {
        return event(id, "{\"from\":\"" + from + "\",\"to\":\"" + to + "\",\"amount\":" + amount + "}");
    }

    private static Event poison(String id) {
        return event(id, "{\"poison\":true}");
    }

    private static Event event(String id, String payload) {
        return new Event(id, payload.getBytes(StandardCharsets.UTF_8), "payments", 0, 1, 0L, new HashMap<>());
    }

    /** Balance by account, in whole units. */
    private Map<String, Integer> balances() throws SQLException {
        Map<String, Integer> balances = new HashMap<>();
        db.query("SELECT id, balance FROM ledger.accounts",
                row -> balances.put(row.getString(1), row.getBigDecimal(2).intValueExact()));
        return balances;
    }

    /** The result of each committed row, as jsonb prints it. */
    private Map<String, String> results() throws SQLException {
        Map<String, String> results = new HashMap<>();
        db.query("SELECT id, result::text FROM " + SinkDatabase.TABLE,
                row -> results.put(row.getString(1), row.getString(2)));
        return results;
    }

    private Map<String, String> statuses() throws SQLException {
        Map<String, String> statuses = new HashMap<>();
        db.query("SELECT id, result->>'status' FROM " + SinkDatabase.TABLE,
                row -> statuses.put(row.getString(1), row.getString(2)));
        return statuses;
    }
}
