package io.onceflow.tools.audit;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.config.OnceflowConfig;
import io.onceflow.config.PostgresSettings;
import io.onceflow.sink.postgres.internal.PostgresSchema;
import io.onceflow.testing.TestPostgres.TestDatabase;
import io.onceflow.testing.TestPostgres;
import java.sql.SQLException;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** The audit of the events table's effect results, against a real server. */
class PostgresTableAuditTest {
    private static final Set<String> IDS = Set.of("applied", "rejected", "failed", "not-run", "before-effects");

    private final TestDatabase database = TestPostgres.shared().newDatabase();

    @Test
    void countsTheResultsAndReportsRowsWithoutOneWhenAnEffectIsConfigured() throws Exception {
        createTablesWithResults();

        AuditReport report = audit(settings("ledger.apply_payment"));

        assertThat(report.effectsApplied()).isEqualTo(1);
        assertThat(report.effectsRejected()).isEqualTo(1);
        assertThat(report.effectsFailed()).isEqualTo(1);
        assertThat(report.effectsMissing()).isEqualTo(1);
        assertThat(report.problems()).containsExactly("1 rows in the PostgreSQL table whose effect is still pending"
                + " (committed, no result yet), e.g. [not-run]");
        assertThat(report.toText()).contains("  effects rejected          1, e.g. [rejected]\n",
                "  effects failed            1, e.g. [failed]\n", "  effects missing           1\n");
        assertThat(report.toJson()).contains("\"effects\" : {\n      \"applied\" : 1,\n      \"rejected\" : {\n"
                + "        \"count\" : 1,\n        \"examples\" : [ \"rejected\" ]");
    }

    @Test
    void withoutAnEffectARowWithoutAResultIsNoProblem() throws Exception {
        createTablesWithResults();

        AuditReport report = audit(settings(null));

        assertThat(report.clean()).isTrue();
        assertThat(report.effectsFailed()).as("results are reported where there are any").isEqualTo(1);
    }

    @Test
    void aTableWithoutTheResultColumnHasNoResultForAnyRow() throws Exception {
        execute(schema().ddl().replace(",\n    result jsonb,\n    effect_transaction text", "")
                .replaceAll("CREATE INDEX[^;]*;", ""));
        execute("INSERT INTO onceflow_events (id, payload) SELECT id, '{}' FROM unnest(array['applied', 'rejected',"
                + " 'failed', 'not-run', 'before-effects']) AS ids(id)");

        assertThat(audit(settings("ledger.apply_payment")).effectsMissing())
                .as("rows from before the effect: no transaction of theirs calls it").isZero();
        AuditReport withoutEffect = audit(settings(null));
        assertThat(withoutEffect.clean()).isTrue();
        assertThat(withoutEffect.toText()).doesNotContain("effects");
    }

    private void createTablesWithResults() throws SQLException {
        execute(schema().ddl());
        execute("INSERT INTO onceflow_events (id, payload, result) VALUES"
                + " ('applied', '{}', '{\"status\": \"applied\"}'),"
                + " ('rejected', '{}', '{\"status\": \"rejected\", \"reason\": \"insufficient funds\"}'),"
                + " ('failed', '{}', '{\"status\": \"failed\", \"sqlstate\": \"P0001\", \"error\": \"poison\"}'),"
                + " ('before-effects', '{}', NULL)");
        execute("INSERT INTO onceflow_events (id, payload, effect_transaction) VALUES"
                + " ('not-run', '{}', 'onceflow:p:e1:s0:c1')");
        execute("INSERT INTO onceflow_events_effect_queue (id) VALUES ('not-run')");
    }

    private static PostgresSchema schema() {
        return new PostgresSchema("onceflow_events", "onceflow_rejects", "onceflow_commit_log", "onceflow_runs",
                "onceflow_writers");
    }

    private static AuditReport audit(PostgresSettings settings) {
        AuditReport report = new AuditReport(AuditScope.wholeTopics(), Duration.ofDays(7));
        new PostgresTableAudit(settings).audit(IDS, Set.of(), report);
        return report;
    }

    /** The job's own configuration, as the audit command reads it; nothing but PostgreSQL is contacted. */
    private PostgresSettings settings(String effectFunction) {
        Map<String, String> values = new HashMap<>(Map.of(
                "kafka.bootstrap.servers", "localhost:9092",
                "input.topics", "payments",
                "input.group.id", "onceflow",
                "output.topic", "out",
                "dead.letter.topic", "dead",
                "kafka.transactional.id.prefix", "onceflow",
                "postgres.url", database.jdbcUrl(),
                "postgres.user", database.user(),
                "postgres.password", database.password(),
                "postgres.sink.prefix", "audited"));
        if (effectFunction != null) {
            values.put("postgres.effect.function", effectFunction);
        }
        return OnceflowConfig.fromMap(values, Map.of()).postgres().orElseThrow();
    }

    private void execute(String sql) throws SQLException {
        database.execute(sql);
    }
}
