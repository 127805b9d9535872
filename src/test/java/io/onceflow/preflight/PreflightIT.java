package io.onceflow.preflight;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.onceflow.cli.CannotRunException;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.job.JobSinks;
import io.onceflow.sink.postgres.internal.EffectFunction;
import io.onceflow.testing.TestKafka;
import io.onceflow.testing.TestPostgres;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The checks before the start against a real broker and a real PostgreSQL, one service problem at a time. */
class PreflightIT {
    private final TestKafka kafka = TestKafka.shared();
    private final Map<String, String> settings = new HashMap<>();
    private TestPostgres.TestDatabase database;

    @BeforeEach
    void topicsAndDatabase() {
        String in = TestKafka.uniqueTopic("preflight-in");
        String out = TestKafka.uniqueTopic("preflight-out");
        String dlq = TestKafka.uniqueTopic("preflight-dlq");
        kafka.createTopics(2, in, out, dlq);
        database = TestPostgres.shared().newDatabase();
        settings.putAll(Map.of("kafka.bootstrap.servers", kafka.bootstrapServers(), "input.topics", in,
                "input.group.id", "preflight", "output.topic", out, "dead.letter.topic", dlq,
                "kafka.transactional.id.prefix", "preflight", "postgres.url", urlWithoutUser(),
                "postgres.user", database.user(), "postgres.sink.prefix", "preflight"));
        settings.put("postgres.password", database.password());
    }

    /** The test database's URL names its user, which would override postgres.user. */
    private String urlWithoutUser() {
        return database.jdbcUrl().replaceFirst("\\?.*$", "");
    }

    private OnceflowConfig config() {
        return OnceflowConfig.fromMap(settings, Map.of());
    }

    private List<String> problems(Preflight.Purpose purpose) {
        try {
            Preflight.check(config(), purpose);
            return List.of();
        } catch (CannotRunException e) {
            return e.problems();
        }
    }

    @Test
    void servicesThatAreReadyPass() {
        assertThatCode(() -> Preflight.check(config(), Preflight.Purpose.RUN_JOB)).doesNotThrowAnyException();
    }

    @Test
    void aTransactionTimeoutAboveTheBrokersMaximumIsReportedFromTheBrokersOwnSetting() {
        // the configuration claims the brokers allow 30 min; the embedded broker allows Kafka's default, 15 min
        settings.put("kafka.transaction.timeout", "20min");
        settings.put("kafka.transaction.timeout.broker.max", "30min");
        settings.keySet().removeIf(key -> key.startsWith("postgres."));

        assertThat(problems(Preflight.Purpose.RUN_JOB)).singleElement().asString()
                .startsWith("kafka.transaction.timeout: 1200 s exceeds the brokers' transaction.max.timeout.ms (900 s at "
                        + kafka.bootstrapServers());
        assertThat(problems(Preflight.Purpose.AUDIT)).as("the audit writes no transactions").isEmpty();
    }

    @Test
    void withoutATransactionTimeoutTheJobTakesTheBrokersMaximumAndSaysWhatOutageItSurvives() {
        // a stated maximum that is wrong: the brokers' own (the embedded broker has Kafka's default, 15 min) wins
        settings.put("kafka.transaction.timeout.broker.max", "30min");

        Preflight.Result result = Preflight.check(config(), Preflight.Purpose.RUN_JOB);

        assertThat(result.kafkaTransactionTimeout()).isEqualTo(Duration.ofMinutes(15));
        assertThat(result.notes()).containsExactly("Kafka output of a completed checkpoint survives an outage of up to"
                + " 11min (kafka.transaction.timeout 15min (not set: the brokers' transaction.max.timeout.ms) minus"
                + " the longest checkpoint cycle (0 + 1) x max(10s, 2min + 0ms) + 2min = 4min): after a longer one the"
                + " brokers abort its transactions and the output is lost");
        // a set timeout within the brokers' maximum is the job's
        settings.put("kafka.transaction.timeout", "14min");
        assertThat(Preflight.check(config(), Preflight.Purpose.RUN_JOB).kafkaTransactionTimeout())
                .isEqualTo(Duration.ofMinutes(14));
    }

    @Test
    void brokersWhoseMaximumSurvivesTooShortAnOutageAreRefusedUnlessTheRiskIsAccepted() {
        String in = TestKafka.uniqueTopic("preflight-in");
        String out = TestKafka.uniqueTopic("preflight-out");
        String dlq = TestKafka.uniqueTopic("preflight-dlq");
        // 13 min less the default checkpoint cycle of 4 min survives 9 min: above restart.budget, below the floor
        try (TestKafka brokers = TestKafka.startOwn(Map.of("transaction.max.timeout.ms", "780000"))) {
            brokers.createTopics(1, in, out, dlq);
            settings.keySet().removeIf(key -> key.startsWith("postgres."));
            settings.putAll(Map.of("kafka.bootstrap.servers", brokers.bootstrapServers(), "input.topics", in,
                    "output.topic", out, "dead.letter.topic", dlq));

            assertThat(problems(Preflight.Purpose.RUN_JOB)).containsExactly("kafka.transaction.timeout: Kafka output"
                    + " of a completed checkpoint would survive an outage of only 9min (kafka.transaction.timeout 13min"
                    + " (not set: the brokers' transaction.max.timeout.ms) minus the longest checkpoint cycle (0 + 1) x"
                    + " max(10s, 2min + 0ms) + 2min = 4min), less than the 10min the start check requires: after a"
                    + " longer outage (a JobManager failover, a node replacement) the brokers abort its transactions"
                    + " and the output is lost. Raise the brokers' transaction.max.timeout.ms (and"
                    + " kafka.transaction.timeout with it, or leave that unset to use the brokers' maximum), or lower"
                    + " the checkpoint settings; or, to accept that loss, set"
                    + " kafka.transaction.timeout.accept.loss.after.short.outage=true.");
            assertThat(problems(Preflight.Purpose.AUDIT)).as("the audit writes no transactions").isEmpty();

            settings.put("kafka.transaction.timeout.accept.loss.after.short.outage", "true");
            Preflight.Result accepted = Preflight.check(config(), Preflight.Purpose.RUN_JOB);
            assertThat(accepted.kafkaTransactionTimeout()).isEqualTo(Duration.ofMinutes(13));
            assertThat(accepted.notes()).singleElement().asString()
                    .startsWith("Kafka output of a completed checkpoint survives an outage of up to 9min")
                    .endsWith("(accepted: kafka.transaction.timeout.accept.loss.after.short.outage=true)");
        }
    }

    @Test
    void kafkaClientSettingsTheClientRefusesAreNamed() {
        settings.put("kafka.properties.security.protocol", "NOPE");

        assertThat(problems(Preflight.Purpose.RUN_JOB)).singleElement().asString()
                .startsWith("kafka.properties: the Kafka client refuses its settings (")
                .contains("security.protocol");
    }

    @Test
    void aUserWhoMayNotWriteOrCreateTheTablesIsToldWhatToGrant() throws Exception {
        String reader = "reader_" + UUID.randomUUID().toString().substring(0, 8);
        try (Connection admin = database.connect(); Statement sql = admin.createStatement()) {
            sql.execute("CREATE ROLE " + reader + " LOGIN");
            sql.execute("CREATE TABLE onceflow_events (id text PRIMARY KEY)");
            sql.execute("GRANT SELECT ON onceflow_events TO " + reader);
            // PostgreSQL 15+ grants nobody but the owner CREATE on schema public
        }
        settings.put("postgres.user", reader);
        settings.put("postgres.password", "");

        assertThat(problems(Preflight.Purpose.RUN_JOB)).containsExactly(
                "postgres.table: user '" + reader + "' may not INSERT on onceflow_events at " + server()
                        + ". GRANT SELECT, INSERT, UPDATE ON onceflow_events TO " + reader + ".",
                cannotCreate("postgres.rejects.table", "onceflow_rejects", reader, "SELECT, INSERT, UPDATE"),
                cannotCreate("postgres.commit.log.table", "onceflow_commit_log", reader, "SELECT, INSERT"),
                cannotCreate("postgres.runs.table", "onceflow_runs", reader, "SELECT, INSERT"),
                cannotCreate("postgres.writers.table", "onceflow_writers", reader, "SELECT, INSERT, UPDATE"),
                cannotCreate("postgres.table", "onceflow_events_effect_queue", reader, "SELECT, INSERT, UPDATE, DELETE"),
                cannotCreate("postgres.table", "onceflow_events_effect_log", reader, "SELECT, INSERT"));
        assertThat(problems(Preflight.Purpose.AUDIT)).as("the audit only reads the event table").isEmpty();
    }

    private String cannotCreate(String key, String table, String user, String privileges) {
        return key + ": the table " + table + " does not exist at " + server() + " and user '" + user
                + "' may not create it in schema public. Create the tables as a DBA (--print-postgres-ddl prints the"
                + " statements) and grant " + privileges + " on them, or GRANT CREATE ON SCHEMA public TO " + user + ".";
    }

    @Test
    void aPrivilegeMissingOnTheRejectsTableIsReportedBeforeARefusedRowNeedsIt() throws Exception {
        String writer = "writer_" + UUID.randomUUID().toString().substring(0, 8);
        try (Connection admin = database.connect(); Statement sql = admin.createStatement()) {
            JobSinks.postgresSchema(config().postgres().orElseThrow().tables()).createIfMissing(admin);
            sql.execute("CREATE ROLE " + writer + " LOGIN");
            sql.execute("GRANT SELECT, INSERT, UPDATE ON onceflow_events, onceflow_commit_log, onceflow_runs,"
                    + " onceflow_writers TO " + writer);
            sql.execute("GRANT SELECT ON onceflow_rejects TO " + writer);
            sql.execute("GRANT SELECT, INSERT, UPDATE, DELETE ON onceflow_events_effect_queue TO " + writer);
            sql.execute("GRANT SELECT, INSERT ON onceflow_events_effect_log TO " + writer);
        }
        settings.put("postgres.user", writer);
        settings.put("postgres.password", "");

        assertThat(problems(Preflight.Purpose.RUN_JOB)).containsExactly(
                "postgres.rejects.table: user '" + writer + "' may not INSERT on onceflow_rejects at " + server()
                        + ". GRANT SELECT, INSERT, UPDATE ON onceflow_rejects TO " + writer + ".");
    }

    @Test
    void aMissingEffectFunctionIsNamedWithATemplate() {
        settings.put("postgres.effect.function", "apply_payment");

        assertThat(problems(Preflight.Purpose.RUN_JOB)).containsExactly("postgres.effect.function: at " + server()
                + ", apply_payment(text, jsonb) does not exist: create it with the parameters (message_id text,"
                + " payload jsonb), e.g. " + EffectFunction.createTemplate("apply_payment"));
        assertThat(problems(Preflight.Purpose.AUDIT)).as("the audit calls no function")
                .noneMatch(problem -> problem.startsWith("postgres.effect.function"));
    }

    private String server() {
        return urlWithoutUser().replaceFirst("^jdbc:postgresql://", "");
    }
}
