package io.onceflow.sink.postgres;

import static io.onceflow.sink.postgres.BusinessEffectsTest.FUNCTION;
import static io.onceflow.sink.postgres.BusinessEffectsTest.event;
import static io.onceflow.sink.postgres.BusinessEffectsTest.payment;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.entry;

import io.onceflow.api.Event;
import io.onceflow.cli.CannotRunException;
import io.onceflow.cli.ExitCode;
import io.onceflow.config.ConfigException;
import io.onceflow.config.ValidSettings;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.EventsTable;
import io.onceflow.tools.effects.EffectsCommand;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.postgresql.PGConnection;
import org.postgresql.PGNotification;

/**
 * {@code bin/onceflow effects retry-failed | retry-rejected | skip} ({@link EffectsCommand})
 * against a real PostgreSQL server, with the job's settings: the ledger of {@link
 * BusinessEffectsTest}, whose payments fail while the function refuses them and move money once the
 * function is fixed. The balances are the oracle: an effect re-driven twice, or an applied one
 * re-driven, shows in them; the effect log is the history.
 */
class EffectActionsTest {
    /** The ledger's function while a bug makes it refuse payments flagged "new-scheme". */
    private static final String BROKEN = BusinessEffectsTest.APPLY_PAYMENT.replace("BEGIN\n",
            "BEGIN\n  IF payload ? 'new-scheme' THEN RAISE EXCEPTION 'scheme not supported: %', message_id; END IF;\n");

    private final SinkDatabase db = new SinkDatabase();
    private PostgresSinkConfig config;

    @BeforeEach
    void createTheLedger() throws Exception {
        db.createLedger("VALUES ('alice', 100), ('bob', 0), ('carol', 0)", BROKEN);
        config = db.config(db.builder("ledger").setEffectFunction(FUNCTION));
    }

    @Test
    void aFailedEffectReDrivenAfterTheFixIsAppliedOnceAndOnlyOnce() throws Exception {
        db.commitFreshCheckpoint(config, newScheme("s1", "alice", "bob", 10), payment("p1", "alice", "carol", 5));
        SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered());
        assertThat(db.effectStatuses()).containsOnly(entry("s1", "failed"), entry("p1", "applied"));
        assertThat(db.failedEffects()).as("the failure stays queued for an operator").isOne();
        fixTheFunction();

        String printed;
        try (Connection listener = db.database.connect()) {
            listen(listener);
            printed = effects("retry-failed", "--id", "s1", "--reason", "TICKET-7: scheme supported");
            assertThat(notifications(listener)).as("the running job's workers are woken").isNotEmpty();
        }
        assertThat(printed).startsWith("Re-driven 1 effect of onceflow_events: s1\n")
                .contains("The effect workers of the running job apply them, each exactly once",
                        "postgres.effect.function=" + FUNCTION);
        assertThat(db.effectStatuses()).as("pending again").containsEntry("s1", null);
        assertThat(db.failedEffects()).isZero();
        assertThat(db.queuedEffects()).isOne();

        assertThat(effects("retry-failed", "--id", "s1")).as("a second re-drive before the workers ran")
                .isEqualTo("Nothing was re-driven.\n"
                        + "  not re-driven: s1 (queued: its effect is still to be applied)\n");
        assertThat(SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered())).isOne();
        assertThat(effects("retry-failed", "--all")).as("a third, after they ran")
                .isEqualTo("No effect in onceflow_events is recorded as failed: nothing was re-driven.\n");
        assertThat(SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered())).isZero();

        assertThat(db.effectStatuses()).containsOnly(entry("s1", "applied"), entry("p1", "applied"));
        assertThat(db.ledgerBalances()).as("s1's 10 moved once, p1's 5 once")
                .containsExactlyInAnyOrderEntriesOf(Map.of("alice", 85, "bob", 10, "carol", 5));
        assertThat(history()).containsExactly("s1 retried TICKET-7: scheme supported failed");
    }

    @Test
    void appliedRejectedAndUnknownIdsAreNeverQueuedAndEachIsExplained() throws Exception {
        db.commitFreshCheckpoint(config, payment("p1", "alice", "bob", 10), payment("broke", "carol", "bob", 10),
                newScheme("s1", "alice", "bob", 1));
        SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered());
        fixTheFunction();

        String printed = effects("retry-failed", "--id", "p1", "--id", "broke", "--id", "s1", "--id", "nope", "--id", "s1");

        assertThat(printed).isEqualTo("Re-driven 1 effect of onceflow_events: s1\n"
                + "  not re-driven: p1 (applied: never queued again)\n"
                + "  not re-driven: broke (rejected by the effect function: a business outcome; re-drive it by name"
                + " with retry-rejected)\n"
                + "  not re-driven: nope (no row in onceflow_events)\n"
                + printed.substring(printed.indexOf("The effect workers")));
        assertThat(SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered())).isOne();
        assertThat(db.ledgerBalances()).containsExactlyInAnyOrderEntriesOf(Map.of("alice", 89, "bob", 11, "carol", 0));
    }

    @Test
    void allQueuesEveryFailedEffectOfTheTable() throws Exception {
        db.commitFreshCheckpoint(config, newScheme("s1", "alice", "bob", 10), newScheme("s2", "alice", "carol", 20),
                payment("p1", "alice", "bob", 1));
        SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered());
        fixTheFunction();

        assertThat(effects("retry-failed", "--all")).startsWith("Re-driven 2 effects of onceflow_events: ")
                .contains("s1", "s2").doesNotContain("p1");
        assertThat(SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered())).isEqualTo(2);
        assertThat(db.ledgerBalances()).containsExactlyInAnyOrderEntriesOf(Map.of("alice", 69, "bob", 11, "carol", 20));
    }

    @Test
    void aFunctionThatCannotBeCalledQueuesNothing() throws Exception {
        db.commitFreshCheckpoint(config, newScheme("s1", "alice", "bob", 10));
        SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered());
        db.execute("DROP FUNCTION " + FUNCTION);

        assertThatThrownBy(() -> effects("retry-failed", "--all"))
                .isInstanceOfSatisfying(CannotRunException.class, e -> assertThat(e.problems()).singleElement()
                        .asString().startsWith("postgres.effect.function: nothing was done: the effect function"
                                + " (postgres.effect.function) " + FUNCTION + "(text, jsonb) does not exist")
                        .endsWith("Fix the function, then run the command again."));
        assertThat(db.effectStatuses()).containsOnly(entry("s1", "failed"));
        assertThat(db.queuedEffects()).isZero();
        assertThat(db.failedEffects()).isOne();
    }

    @Test
    void aRejectedEffectIsReDrivenOnlyByNameWithAReasonAndAppliedOnce() throws Exception {
        db.commitFreshCheckpoint(config, payment("broke", "carol", "bob", 10), payment("p1", "alice", "bob", 1));
        SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered());
        assertThat(db.effectStatuses()).containsOnly(entry("broke", "rejected"), entry("p1", "applied"));
        db.execute("UPDATE ledger.accounts SET balance = 10 WHERE id = 'carol'"); // the mistake, mended

        assertThat(effects("retry-failed", "--all")).as("a rejection is not a failure")
                .startsWith("No effect in onceflow_events is recorded as failed");
        assertThat(effects("retry-rejected", "--id", "broke", "--id", "p1", "--reason", "TICKET-9: carol funded"))
                .startsWith("Re-driven 1 effect of onceflow_events: broke\n"
                        + "  not re-driven: p1 (applied: never queued again)\n");
        assertThat(effects("retry-rejected", "--id", "broke", "--reason", "again")).as("once")
                .startsWith("Nothing was re-driven.\n  not re-driven: broke (queued: its effect is still to be applied)");
        assertThat(SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered())).isOne();

        assertThat(db.effectStatuses()).containsOnly(entry("broke", "applied"), entry("p1", "applied"));
        assertThat(db.ledgerBalances()).containsExactlyInAnyOrderEntriesOf(Map.of("alice", 99, "bob", 11, "carol", 0));
        assertThat(history()).containsExactly("broke retried TICKET-9: carol funded rejected");
    }

    @Test
    void aSkippedEffectLeavesTheQueueWithItsReasonAndIsNeverCalled() throws Exception {
        db.commitFreshCheckpoint(config, newScheme("s1", "alice", "bob", 10), newScheme("s2", "alice", "bob", 20));
        SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered());
        fixTheFunction();

        assertThat(effects("skip", "--id", "s1", "--reason", "TICKET-8: paid by hand"))
                .isEqualTo("Skipped 1 effect of onceflow_events: s1\nLogged, with the reason, in onceflow_events_effect_log.\n");
        assertThat(effects("skip", "--id", "s1", "--reason", "twice")).as("once")
                .isEqualTo("Nothing was skipped.\n  not skipped: s1 (skipped by an operator: never called)\n");
        assertThat(effects("retry-failed", "--all")).startsWith("Re-driven 1 effect of onceflow_events: s2\n");
        assertThat(SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered())).isOne();

        assertThat(db.effectStatuses()).containsOnly(entry("s1", "skipped"), entry("s2", "applied"));
        assertThat(db.failedEffects()).isZero();
        assertThat(db.ledgerBalances()).as("s2's 20 moved, s1's never")
                .containsExactlyInAnyOrderEntriesOf(Map.of("alice", 80, "bob", 20, "carol", 0));
        db.query("SELECT result->>'reason', result->'skipped'->>'status' FROM " + SinkDatabase.TABLE + " WHERE id = 's1'",
                row -> assertThat(row.getString(1) + " / " + row.getString(2)).isEqualTo("TICKET-8: paid by hand / failed"));
        assertThat(history()).containsExactly("s1 skipped TICKET-8: paid by hand failed", "s2 retried null failed");
    }

    @Test
    void skipAndRetryRejectedNameTheirEffectsAndSayWhy() {
        assertThatThrownBy(() -> effects("skip", "--all"))
                .isInstanceOfSatisfying(ConfigException.class, e -> assertThat(e.problems()).containsExactly(
                        "--all: is not accepted by skip: it acts on effects named one by one. Name each with --id ID"
                                + " (repeat it).",
                        "--reason: is not given: skip changes a settled outcome and keeps why in the effect log. Say"
                                + " why with --reason TEXT, e.g. --reason \"TICKET-123: limit raised\"."));
        assertThatThrownBy(() -> effects("retry-rejected", "--id", "x"))
                .isInstanceOfSatisfying(ConfigException.class, e -> assertThat(e.problems()).singleElement()
                        .asString().startsWith("--reason: is not given: retry-rejected changes a settled outcome"));
    }

    /** A payment that the broken function refuses. */
    private static Event newScheme(String id, String from, String to, int amount) {
        return event(id, "{\"from\":\"" + from + "\",\"to\":\"" + to + "\",\"amount\":" + amount
                + ",\"new-scheme\":true}");
    }

    private void fixTheFunction() throws SQLException {
        db.execute(BusinessEffectsTest.APPLY_PAYMENT.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION"));
    }

    /** Each action of the effect log, oldest first: id, action, reason, the status before. */
    private List<String> history() throws SQLException {
        List<String> actions = new ArrayList<>();
        db.query("SELECT id, action, reason, previous_result->>'status' FROM " + SinkDatabase.TABLE + "_effect_log"
                + " ORDER BY done_at, id", row -> actions.add(row.getString(1) + " " + row.getString(2) + " "
                + row.getString(3) + " " + row.getString(4)));
        return actions;
    }

    /** Runs the subcommand with the job's settings and {@code more}; returns what it printed. */
    private String effects(String subcommand, String... more) throws Exception {
        List<String> args = new ArrayList<>(List.of(subcommand));
        Map<String, String> settings = ValidSettings.required();
        settings.put("postgres.url", db.database.jdbcUrl());
        settings.put("postgres.user", db.database.user());
        settings.put("postgres.password", db.database.password());
        settings.put("postgres.sink.prefix", "ledger");
        settings.put("postgres.effect.function", FUNCTION);
        settings.forEach((key, value) -> args.addAll(List.of("--" + key, value)));
        args.addAll(List.of(more));
        PrintStream console = System.out;
        ByteArrayOutputStream printed = new ByteArrayOutputStream();
        try {
            System.setOut(new PrintStream(printed, true, StandardCharsets.UTF_8));
            assertThat(EffectsCommand.execute(args.toArray(String[]::new))).isEqualTo(ExitCode.CLEAN);
        } finally {
            System.setOut(console);
        }
        return printed.toString(StandardCharsets.UTF_8);
    }

    private static void listen(Connection connection) throws SQLException {
        try (Statement statement = connection.createStatement()) {
            statement.execute("LISTEN " + new EventsTable(SinkDatabase.TABLE).queue().notifyChannel());
        }
    }

    private static PGNotification[] notifications(Connection connection) throws SQLException {
        PGNotification[] received = connection.unwrap(PGConnection.class).getNotifications(5000);
        return received == null ? new PGNotification[0] : received;
    }
}
