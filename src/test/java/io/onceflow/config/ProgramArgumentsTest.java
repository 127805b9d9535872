package io.onceflow.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.onceflow.sink.postgres.options.PostgresTableOptions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class ProgramArgumentsTest {
    private static final Set<String> AUDIT_OPTIONS = Set.of("format", "read-timeout");

    private static String[] withRequired(String... more) {
        List<String> args = new ArrayList<>();
        ValidSettings.required().forEach((key, value) -> {
            args.add("--" + key);
            args.add(value);
        });
        args.addAll(List.of(more));
        return args.toArray(String[]::new);
    }

    @ParameterizedTest
    @ValueSource(strings = {"--help", "-h"})
    void helpIsFoundAnywhereEvenAmongBrokenArguments(String help) {
        assertThat(ProgramArguments.helpRequested(new String[] {"--config", "missing.properties", help})).isTrue();
        assertThat(ProgramArguments.helpRequested(new String[] {help, "stray", "--parallelism"})).isTrue();
        assertThat(ProgramArguments.helpRequested(withRequired())).isFalse();
    }

    @Test
    void commandOptionsTakeBothFormsAndDurationsAreWrittenAsTheJobsAre() {
        ProgramArguments arguments = ProgramArguments.parse(
                withRequired("--format=json", "--read-timeout", "10min"), Set.of(), AUDIT_OPTIONS);

        assertThat(arguments.choice("format", List.of("text", "json"))).isEqualTo("json");
        assertThat(arguments.duration("read-timeout", Duration.ofSeconds(120))).isEqualTo(Duration.ofMinutes(10));
        assertThat(arguments.config(Map.of()).inputTopics()).containsExactly("payments", "refunds");
    }

    @Test
    void badCommandOptionsAreReportedWithTheConfigurationsProblems() {
        ProgramArguments arguments = ProgramArguments.parse(
                new String[] {"--format", "yaml", "--read-timeout=10 minutes", "--dedup.ttl", "forever"},
                Set.of(), AUDIT_OPTIONS);
        arguments.choice("format", List.of("text", "json"));
        arguments.duration("read-timeout", Duration.ofSeconds(120));

        assertThatThrownBy(() -> arguments.config(Map.of()))
                .isInstanceOfSatisfying(ConfigException.class, e -> assertThat(e.problems())
                        .contains("--format: is not one of text, json. Use one of text, json.")
                        .anyMatch(p -> p.startsWith("--read-timeout: '10 minutes' is not a duration."))
                        .anyMatch(p -> p.startsWith("dedup.ttl: 'forever' is not a duration."))
                        .anyMatch(p -> p.startsWith("kafka.bootstrap.servers: is required")));
    }

    @Test
    void postgresTablesNeedOnlyTheUrlUserAndTablesNotTheSinkPrefix() {
        ProgramArguments arguments = ProgramArguments.parse(new String[] {
            "--postgres.url=jdbc:postgresql://db:5432/payments", "--postgres.user", "onceflow",
            "--postgres.table", "ledger.events", "--print-postgres-ddl"}, Set.of("print-postgres-ddl"), Set.of());

        PostgresTableOptions tables = arguments.postgresTables(Map.of());

        assertThat(tables.events()).isEqualTo("ledger.events");
        assertThat(tables.commitLog()).isEqualTo("onceflow_commit_log");
    }

    @Test
    void anInvalidSinkPrefixIsStillReportedByThePostgresTables() {
        ProgramArguments arguments = ProgramArguments.parse(new String[] {
            "--postgres.url=jdbc:postgresql://db:5432/payments", "--postgres.user", "onceflow",
            "--postgres.sink.prefix", "no-dashes"},
                Set.of(), Set.of());

        assertThatThrownBy(() -> arguments.postgresTables(Map.of()))
                .isInstanceOfSatisfying(ConfigException.class, e -> assertThat(e.problems())
                        .singleElement().asString().startsWith("postgres.sink.prefix: "));
    }

    @Test
    void theJobStillRequiresTheSinkPrefix() {
        ProgramArguments arguments = ProgramArguments.parse(new String[] {
            "--kafka.bootstrap.servers", "kafka:9092", "--input.topics", "in", "--input.group.id", "g",
            "--output.topic", "out", "--dead.letter.topic", "dlq", "--kafka.transactional.id.prefix", "p",
            "--postgres.url=jdbc:postgresql://db:5432/payments", "--postgres.user", "onceflow"}, Set.of(), Set.of());

        assertThatThrownBy(() -> arguments.config(Map.of()))
                .isInstanceOfSatisfying(ConfigException.class, e -> assertThat(e.problems())
                        .anyMatch(problem -> problem.startsWith("postgres.sink.prefix: is required when postgres.url is set")));
    }

    @Test
    void postgresTablesNeedNoPasswordEvenWhenItsVariableIsUnset() {
        ProgramArguments arguments = ProgramArguments.parse(new String[] {
            "--postgres.url=jdbc:postgresql://db:5432/payments", "--postgres.user", "onceflow",
            "--postgres.password", "${ONCEFLOW_UNSET_PASSWORD}"}, Set.of(), Set.of());

        assertThat(arguments.postgresTables(Map.of()).events()).isEqualTo("onceflow_events");
    }

    @Test
    void postgresSettingsWithoutTheUrlAreAConfigurationError() {
        ProgramArguments arguments = ProgramArguments.parse(
                new String[] {"--postgres.table", "events"}, Set.of(), Set.of());

        assertThatThrownBy(() -> arguments.postgresTables(Map.of()))
                .isInstanceOfSatisfying(ConfigException.class, e -> assertThat(e.problems()).containsExactly(
                        "postgres.url: is required here but not set. Set it: JDBC URL"
                                + " jdbc:postgresql://host:port/database; setting it enables the PostgreSQL sink.",
                        "postgres.table: is set but postgres.url is not. Set postgres.url to enable the PostgreSQL"
                                + " sink, or remove postgres.table."));
    }
}
