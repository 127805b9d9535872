package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.options.PostgresWriterOptions;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSchema;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;


class PostgresSinkBuilderTest {
    private static final String SECRET = "s3cr3t-pa55";

    private static PostgresSinkBuilder valid() {
        return PostgresSink.builder()
                .setJdbcUrl("jdbc:postgresql://db:5432/onceflow")
                .setUser("onceflow")
                .setPassword(SECRET)
                .setSinkPrefix("orders_pg");
    }

    @Test
    void defaults() {
        PostgresSinkConfig config = valid().build().config();

        assertThat(config.tables().events()).isEqualTo("onceflow_events");
        assertThat(config.tables().commitLog()).isEqualTo("onceflow_commit_log");
        assertThat(config.writer().batchSize()).isEqualTo(1000);
        assertThat(config.writer().lockTimeout()).isEqualTo(Duration.ofSeconds(30));
        assertThat(config.writer().statementTimeout()).isEqualTo(Duration.ofSeconds(120));
    }

    @Test
    void acceptsSchemaQualifiedNames() {
        PostgresSinkConfig config = valid().setTable("sink.events").setCommitLogTable("_Sink2.log_1").build().config();

        assertThat(config.tables().events()).isEqualTo("sink.events");
        assertThat(config.tables().commitLog()).isEqualTo("_Sink2.log_1");
    }

    @ParameterizedTest
    @ValueSource(strings = {
            "events; DROP TABLE onceflow_commit_log",
            "events--",
            "events/**/",
            "\"events\"",
            "events(id)",
            "a.b.c",
            "1events",
            "events.",
            ".events",
            "ev ents",
            "événements",
            ""})
    void rejectsTableNamesThatAreNotPlainIdentifiers(String name) {
        assertThatThrownBy(() -> valid().setTable(name).build())
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("table '" + name + "' is not a valid table name")
                .hasMessageContaining("schema.table");
        assertThatThrownBy(() -> valid().setCommitLogTable(name).build())
                .hasMessageContaining("commit log table '" + name + "' is not a valid table name");
        assertThatThrownBy(() -> new PostgresSchema(name, "rejects", "log", "runs", "writers"))
                .isInstanceOf(IllegalArgumentException.class);
    }

    @ParameterizedTest
    @ValueSource(strings = {"apply(text, jsonb)", "apply; DROP TABLE x", "a.b.c", "\"Apply\"", ""})
    void rejectsEffectFunctionNamesThatAreNotPlainIdentifiers(String name) {
        assertThatThrownBy(() -> valid().setEffectFunction(name).build())
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("effect function '" + name + "' is not a valid function name: use function or"
                        + " schema.function")
                .hasMessageContaining("or null for none");
        assertThat(valid().setEffectFunction("ledger.apply_payment").build().config().tables().effectFunction())
                .isEqualTo("ledger.apply_payment");
        assertThat(valid().build().config().tables().effectFunction()).isNull();
    }

    @Test
    void identifierPartsAreLimitedTo63Characters() {
        String longest = "t".repeat(63);

        assertThat(valid().setRejectsTable(longest + "." + longest).build().config().tables().rejects()).hasSize(127);
        assertThatThrownBy(() -> valid().setRejectsTable(longest + "t").build()).hasMessageContaining("62");
        String longestEvents = "e".repeat(63 - "_effect_queue".length());
        assertThat(valid().setTable(longest + "." + longestEvents).build().config().tables().events()).hasSize(114);
        assertThatThrownBy(() -> valid().setTable(longestEvents + "e").build())
                .hasMessageContaining("its effect queue " + longestEvents + "e_effect_queue must fit PostgreSQL's 63"
                        + " characters; use at most 50");
    }

    @Test
    void everyTableNeedsItsOwnName() {
        assertThatThrownBy(() -> valid().setTable("events").setCommitLogTable("EVENTS").build())
                .hasMessageContaining("table name 'EVENTS' is used for two of the sink's tables")
                .hasMessageContaining("give each its own");
        assertThatThrownBy(() -> valid().setRunsTable("log").setWritersTable("log").build())
                .hasMessageContaining("table name 'log' is used for two");
    }

    @ParameterizedTest
    @ValueSource(strings = {"", "job-1", "job:1", "job'", "0123456789012345678901234567890123456789x"})
    void rejectsInvalidSinkPrefixes(String prefix) {
        assertThatThrownBy(() -> valid().setSinkPrefix(prefix).build())
                .hasMessageContaining("sink prefix '" + prefix + "' is not valid")
                .hasMessageContaining("a-z, A-Z, 0-9 and '_'");
    }

    @Test
    void theExactlyOnceSinkNeedsAPrefixTheAtLeastOnceSinkDoesNot() {
        assertThatThrownBy(() -> valid().setSinkPrefix(null).build()).hasMessageContaining("sink prefix 'null'");
        assertThat(valid().setSinkPrefix(null).buildAtLeastOnce()).isNotNull();
    }

    @Test
    void anAtLeastOnceSinkWithAnEffectNeedsAPrefixItsQueuedEffectsAreBoundTo() {
        assertThatThrownBy(() -> valid().setSinkPrefix(null).setEffectFunction("ledger.apply_payment").buildAtLeastOnce())
                .hasMessageContaining("sink prefix 'null' is not valid, and an effect function needs one");
        assertThat(valid().setEffectFunction("ledger.apply_payment").buildAtLeastOnce()).isNotNull();
    }

    @Test
    void aLockTimeoutThatLeavesTheWritersClaimNoValidLockTimeoutIsRefused() {
        Duration lease = Duration.ofSeconds(30);
        Duration longest = PostgresWriterOptions.maxLockTimeout(lease);

        assertThat(valid().setWriterLease(lease).setLockTimeout(longest).build().config().writer().claimLockTimeout())
                .isEqualTo(PostgresWriterOptions.MAX_TIMEOUT);
        assertThatThrownBy(() -> valid().setWriterLease(lease).setLockTimeout(longest.plusMillis(1)).build())
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("plus twice the writer lease")
                .hasMessageContaining("use at most " + longest);
    }

    @Test
    void reportsEveryProblemAtOnce() {
        assertThatThrownBy(() -> PostgresSink.builder()
                        .setJdbcUrl("jdbc:mysql://db/x")
                        .setBatchSize(0)
                        .setLockTimeout(Duration.ZERO)
                        .setStatementTimeout(null)
                        .build())
                .hasMessageContaining("not a PostgreSQL URL")
                .hasMessageContaining("setUser")
                .hasMessageContaining("sink prefix")
                .hasMessageContaining("batch size 0")
                .hasMessageContaining("lock timeout PT0S")
                .hasMessageContaining("statement timeout null");
    }

    @Test
    void thePasswordAppearsNowhere() {
        PostgresRunRegistry sink = valid().build();
        assertThat(sink.toString()).doesNotContain(SECRET).contains("orders_pg");
        assertThat(sink.config().toString()).doesNotContain(SECRET);
        assertThat(valid().buildAtLeastOnce().toString()).doesNotContain(SECRET);

        assertThatThrownBy(() -> valid().setJdbcUrl("jdbc:postgresql://db/x?user=a&password=" + SECRET).build())
                .hasMessageContaining("contains a password")
                .message().doesNotContain(SECRET);
        assertThatThrownBy(() -> valid().setBatchSize(-1).build()).message().doesNotContain(SECRET);
    }
}
