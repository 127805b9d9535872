package io.onceflow.sink.postgres;

import static io.onceflow.sink.postgres.BusinessEffectsTest.APPLY_PAYMENT;
import static io.onceflow.sink.postgres.BusinessEffectsTest.FUNCTION;
import static io.onceflow.sink.postgres.BusinessEffectsTest.payment;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.entry;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.testing.TestPostgres;
import io.onceflow.tools.effects.EffectActions;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A queued effect belongs to the sink and the function that queued it, against a real server: another sink
 * on the same events table (two jobs left on the default table names) neither applies it nor starts, a
 * changed function starts only once the operator re-binds the effects queued for the old one, and a
 * function that is not VOLATILE is refused. The ledger's balances and a log of the other function's
 * calls are the oracle.
 */
class EffectBindingTest {
    /** Another team's effect: it logs each call, so a call it should never have had shows. */
    private static final String LOG_CALL = "CREATE FUNCTION ledger.log_call(message_id text, payload jsonb)"
            + " RETURNS jsonb LANGUAGE sql AS $$ INSERT INTO ledger.calls VALUES (message_id)"
            + " RETURNING jsonb_build_object('status', 'applied', 'logged', true) $$";

    private final SinkDatabase db = new SinkDatabase();

    @BeforeEach
    void createTheLedger() throws Exception {
        createTheLedgerAndAnotherTeamsFunction(db);
    }

    /** The ledger with alice at 100 and bob at 0, its payment function, and ledger.log_call. */
    static void createTheLedgerAndAnotherTeamsFunction(SinkDatabase db) throws Exception {
        db.createLedger("VALUES ('alice', 100), ('bob', 0)", APPLY_PAYMENT);
        db.execute("CREATE TABLE ledger.calls (id text)");
        db.execute(LOG_CALL);
    }

    @Test
    void aSecondSinkOnTheEventsTableNeitherAppliesTheFirstsEffectsNorStarts() throws Exception {
        PostgresSinkConfig jobA = db.config(db.builder("job_a").setEffectFunction(FUNCTION));
        db.commitFreshCheckpoint(jobA, payment("p1", "alice", "bob", 10));
        // job B's settings, as its workers would run them, had its start let them
        PostgresSinkConfig jobB = db.builder("job_b").setEffectFunction("ledger.log_call").build().config();

        assertThat(SinkDatabase.drainEffects(jobB, PostgresSinkMetrics.unregistered())).isZero();
        assertThat(db.queuedEffects()).isEqualTo(1);
        assertThat(calls()).isZero();
        assertThatThrownBy(() -> db.config(db.builder("job_b").setEffectFunction("ledger.log_call")))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageStartingWith("1 effects are queued in onceflow_events_effect_queue by the sink job_a"
                        + " (postgres.sink.prefix), and this sink job_b uses the same events table"
                        + " (postgres.table=onceflow_events): two sinks must not share one, so give this job its own"
                        + " postgres.table");

        assertThat(SinkDatabase.drainEffects(jobA, PostgresSinkMetrics.unregistered())).isEqualTo(1);
        assertThat(db.ledgerBalances()).containsOnly(entry("alice", 90), entry("bob", 10));
        assertThat(calls()).isZero();
    }

    @Test
    void twoSinksThatStartedOnAnEmptyQueueEachApplyOnlyTheirOwnAndNeitherStopsTheOther() throws Exception {
        PostgresSinkConfig jobA = db.config(db.builder("job_a").setEffectFunction(FUNCTION));
        PostgresSinkConfig jobB = db.config(db.builder("job_b").setEffectFunction("ledger.log_call"));

        db.commitFreshCheckpoint(jobB, payment("b1", "alice", "bob", 10));
        db.commitFreshCheckpoint(jobA, payment("a1", "alice", "bob", 10)); // a writer (re)start with B's effect queued

        assertThat(SinkDatabase.drainEffects(jobA, PostgresSinkMetrics.unregistered())).isEqualTo(1);
        assertThat(SinkDatabase.drainEffects(jobB, PostgresSinkMetrics.unregistered())).isEqualTo(1);
        assertThat(db.ledgerBalances()).containsOnly(entry("alice", 90), entry("bob", 10));
        assertThat(calls()).isEqualTo(1);
    }

    @Test
    void aFailedEffectIsRedrivenOnlyByTheSinkItFailedIn() throws Exception {
        PostgresSinkConfig jobA = db.config(db.builder("job_a").setEffectFunction(FUNCTION));
        db.commitFreshCheckpoint(jobA, BusinessEffectsTest.event("px", "{\"poison\":true}"));
        SinkDatabase.drainEffects(jobA, PostgresSinkMetrics.unregistered());
        PostgresSinkConfig jobB = db.builder("job_b").setEffectFunction("ledger.log_call").build().config();

        EffectActions.Outcome byB = redrive(jobB, "px");
        EffectActions.Outcome allByB = redrive(jobB);
        EffectActions.Outcome skippedByB = actions(jobB).skip(List.of("px"), "not mine");

        assertThat(byB.done()).isEmpty();
        assertThat(byB.notDone()).containsOnly(entry("px", "queued by the sink job_a: only that sink acts on it, run"
                + " the command with its settings (postgres.sink.prefix=job_a)"));
        assertThat(allByB.done()).isEmpty();
        assertThat(skippedByB.done()).isEmpty();
        assertThat(db.effectStatuses()).containsOnly(entry("px", "failed"));
        assertThat(redrive(jobA).done()).containsExactly("px");
    }

    @Test
    void aFailureOfAnEarlierVersionJoinsTheQueueAtTheUpgradeAndIsTheUpgradedSinksToRedrive() throws Exception {
        db.execute(SinkDatabase.ddlBeforeBoundEffects());
        // an earlier version recorded the failure in the row only, and named no sink
        db.execute("INSERT INTO onceflow_events (id, payload, effect_transaction, result) VALUES ('p0',"
                + " '{\"from\":\"alice\",\"to\":\"bob\",\"amount\":5}', 'old', '{\"status\":\"failed\"}')");

        PostgresSinkConfig upgraded = db.config(db.builder("ledger").setEffectFunction(FUNCTION));

        assertThat(db.failedEffects()).isOne();
        assertThat(SinkDatabase.drainEffects(upgraded, PostgresSinkMetrics.unregistered())).as("failed: not called").isZero();
        assertThat(redrive(upgraded).done()).containsExactly("p0");
        assertThat(SinkDatabase.drainEffects(upgraded, PostgresSinkMetrics.unregistered())).isOne();
        assertThat(db.ledgerBalances()).containsOnly(entry("alice", 95), entry("bob", 5));
    }

    private static EffectActions actions(PostgresSinkConfig sink) {
        return new EffectActions(sink.connection(), sink.tables(), sink.writer(), sink.sinkPrefix());
    }

    private static EffectActions.Outcome redrive(PostgresSinkConfig sink, String... ids) throws Exception {
        return actions(sink).retryFailed(List.of(ids), null);
    }

    @Test
    void aChangedFunctionStartsOnlyOnceTheOperatorRebindsTheQueuedEffects() throws Exception {
        PostgresSinkConfig before = db.config(db.builder("ledger").setEffectFunction(FUNCTION));
        db.commitFreshCheckpoint(before, payment("p1", "alice", "bob", 10));
        PostgresSinkConfig changed = db.builder("ledger").setEffectFunction("ledger.log_call").build().config();

        assertThat(SinkDatabase.drainEffects(changed, PostgresSinkMetrics.unregistered())).isZero();
        assertThat(calls()).isZero();
        String refusal = refusal(() -> db.config(db.builder("ledger").setEffectFunction("ledger.log_call")));
        assertThat(refusal).startsWith("1 effects of this sink are queued in onceflow_events_effect_queue for the"
                + " function ledger.apply_payment, and postgres.effect.function is now ledger.log_call: start with the"
                + " function they were queued for until the queue drains, or, to have ledger.log_call apply them"
                + " instead, run UPDATE onceflow_events_effect_queue SET effect_function = 'ledger.log_call'");

        db.execute(rebindStatementOf(refusal));
        PostgresSinkConfig rebound = db.config(db.builder("ledger").setEffectFunction("ledger.log_call"));
        assertThat(SinkDatabase.drainEffects(rebound, PostgresSinkMetrics.unregistered())).isEqualTo(1);
        assertThat(calls()).isEqualTo(1);
        assertThat(db.ledgerBalances()).containsOnly(entry("alice", 100), entry("bob", 0));
    }

    @Test
    void oneFunctionSpelledTwoWaysIsOneFunction() throws Exception {
        db.execute("CREATE FUNCTION public.pay_plain(message_id text, payload jsonb) RETURNS jsonb LANGUAGE sql"
                + " AS $$ SELECT '{\"status\": \"applied\"}'::jsonb $$");
        db.commitFreshCheckpoint(db.config(db.builder("ledger").setEffectFunction("pay_plain")), payment("p1", "a", "b", 1));

        PostgresSinkConfig qualified = db.config(db.builder("ledger").setEffectFunction("public.pay_plain"));

        assertThat(SinkDatabase.drainEffects(qualified, PostgresSinkMetrics.unregistered())).isEqualTo(1);
    }

    @Test
    void aFunctionThatIsNotVolatileIsRefusedAtStart() throws Exception {
        db.execute("ALTER FUNCTION ledger.log_call(text, jsonb) STABLE");
        db.execute("CREATE FUNCTION ledger.constant(message_id text, payload jsonb) RETURNS jsonb LANGUAGE sql"
                + " IMMUTABLE AS $$ SELECT '{\"status\": \"applied\"}'::jsonb $$");

        assertThatThrownBy(() -> db.config(db.builder("ledger").setEffectFunction("ledger.log_call")))
                .isInstanceOf(IllegalStateException.class)
                .hasMessage("the effect function (postgres.effect.function) ledger.log_call(text, jsonb) is STABLE, but an"
                        + " effect changes the database, which only a VOLATILE function may do reliably (PostgreSQL may"
                        + " skip or cache calls of the others): ALTER FUNCTION ledger.log_call(text, jsonb) VOLATILE");
        assertThatThrownBy(() -> db.config(db.builder("ledger").setEffectFunction("ledger.constant")))
                .hasMessageContaining("ledger.constant(text, jsonb) is IMMUTABLE");
    }

    @Test
    void effectsQueuedByAnEarlierVersionAreAdoptedByTheFirstStartThatBindsTheQueue() throws Exception {
        db.execute(SinkDatabase.ddlBeforeBoundEffects());
        db.execute("INSERT INTO onceflow_events (id, payload) VALUES ('p0', '{\"from\":\"alice\",\"to\":\"bob\",\"amount\":5}')");
        db.execute("INSERT INTO onceflow_events_effect_queue (id) VALUES ('p0')");

        PostgresSinkConfig upgraded = db.config(db.builder("ledger").setEffectFunction(FUNCTION));

        assertThat(db.database.rows("SELECT to_regclass('onceflow_events_effect_queue_partition_order') IS NOT NULL,"
                + " to_regclass('onceflow_events_effect_queue_source_order') IS NULL"))
                .as("the upgrade replaced the queue's index").containsExactly("t t");
        assertThat(SinkDatabase.drainEffects(upgraded, PostgresSinkMetrics.unregistered())).isEqualTo(1);
        assertThat(db.ledgerBalances()).containsOnly(entry("alice", 95), entry("bob", 5));
        assertThat(db.config(db.builder("other").setEffectFunction("ledger.log_call"))).isNotNull(); // drained
    }

    @Test
    void aRoleThatMayNotAddTheQueuesNewColumnsIsToldTheStatement() throws Exception {
        assumeTrue(TestPostgres.shared().canRestart(), "creates a role that logs in without a password: embedded only");
        db.execute(SinkDatabase.ddlBeforeBoundEffects());
        String role = "writer_" + Long.toHexString(System.nanoTime());
        db.execute("CREATE ROLE " + role + " LOGIN");
        db.execute("GRANT ALL ON ALL TABLES IN SCHEMA public TO " + role);
        db.execute("GRANT USAGE ON SCHEMA ledger TO " + role);

        assertThatThrownBy(() -> SinkDatabase.config(db.builderAs("ledger", role).setEffectFunction(FUNCTION)))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageStartingWith("the effect queue onceflow_events_effect_queue of an earlier version has no"
                        + " sink_prefix column, and the user may not add it (only the table's owner may): have the owner"
                        + " run, in one transaction, ALTER TABLE onceflow_events_effect_queue ADD COLUMN IF NOT EXISTS"
                        + " sink_prefix text; then start the job again");
    }

    /** The sink's tables as the version before the binding created them: a queue without sink and function. */

    private static String refusal(org.assertj.core.api.ThrowableAssert.ThrowingCallable start) {
        try {
            start.call();
        } catch (Throwable refused) {
            return refused.getMessage();
        }
        throw new AssertionError("the start was not refused");
    }

    /** The statement the refusal tells the operator to run. */
    private static String rebindStatementOf(String refusal) {
        Matcher statement = Pattern.compile("run (UPDATE .*?); then start again").matcher(refusal);
        assertThat(statement.find()).as(refusal).isTrue();
        return statement.group(1);
    }

    private long calls() throws Exception {
        long[] count = {0};
        db.query("SELECT count(*) FROM ledger.calls", row -> count[0] = row.getLong(1));
        return count[0];
    }
}
