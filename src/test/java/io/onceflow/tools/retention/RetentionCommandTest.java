package io.onceflow.tools.retention;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.onceflow.cli.ExitCode;
import io.onceflow.config.ConfigException;
import io.onceflow.config.ValidSettings;
import io.onceflow.sink.postgres.options.PostgresTableOptions;
import io.onceflow.sink.postgres.internal.PostgresSchema;
import io.onceflow.testing.TestPostgres.TestDatabase;
import io.onceflow.testing.TestPostgres;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The command's refusals, which come before it connects anywhere, and one run on a real database
 * (what the purge deletes and keeps is {@code RetentionTest}'s).
 */
class RetentionCommandTest {

    private static String[] args(Map<String, String> settings, String... more) {
        List<String> args = new ArrayList<>();
        settings.forEach((key, value) -> args.addAll(List.of("--" + key, value)));
        args.addAll(List.of(more));
        return args.toArray(String[]::new);
    }

    @Test
    void aMissingWindowIsReportedWithTheConfigurationsProblems() {
        assertThatThrownBy(() -> RetentionCommand.execute(new String[] {"--dedup.ttl", "forever"}))
                .isInstanceOfSatisfying(ConfigException.class, e -> assertThat(e.problems())
                        .contains("--keep: is required. Give the retention window, e.g. --keep 14d (see --help).")
                        .anyMatch(problem -> problem.startsWith("dedup.ttl: 'forever' is not a duration"))
                        .anyMatch(problem -> problem.startsWith("kafka.bootstrap.servers: is required")));
    }

    @Test
    void aRunPrintsWhatItDeletedAndExitsClean() throws Exception {
        TestDatabase database = TestPostgres.shared().newDatabase();
        try (Connection connection = database.connect()) {
            new PostgresSchema(PostgresTableOptions.defaults()).createIfMissing(connection);
        }
        database.execute("INSERT INTO onceflow_events (id, first_processed_at) VALUES ('old', now() - interval '8 days'),"
                + " ('new', now())", "INSERT INTO onceflow_commit_log VALUES ('onceflow:payments:e1:s0:c1',"
                + " now() - interval '8 days')");
        Map<String, String> settings = ValidSettings.required();
        settings.put("postgres.url", database.jdbcUrl());
        settings.put("postgres.user", database.user());
        settings.put("postgres.password", database.password());
        settings.put("postgres.sink.prefix", "payments");
        PrintStream console = System.out;
        ByteArrayOutputStream printed = new ByteArrayOutputStream();
        ExitCode exit;
        try {
            System.setOut(new PrintStream(printed, true, StandardCharsets.UTF_8));
            exit = RetentionCommand.execute(args(settings, "--keep", "7d"));
        } finally {
            System.setOut(console);
        }

        assertThat(exit).isEqualTo(ExitCode.CLEAN);
        assertThat(printed.toString(StandardCharsets.UTF_8))
                .contains("events table:      1 rows deleted, 0 older rows kept")
                .contains("commit log:        1 rows deleted");
        assertThat(database.rows("SELECT id FROM onceflow_events")).containsExactly("new");
    }

    @Test
    void aJobWithoutPostgresHasNothingToPurge() {
        assertThatThrownBy(() -> RetentionCommand.execute(args(ValidSettings.required(), "--keep", "14d")))
                .isInstanceOf(ConfigException.class)
                .hasMessageContaining("postgres.url: is not set: there is no PostgreSQL table to purge");
    }

    @Test
    void aWindowShorterThanTheJobsDedupTtlIsRefusedBeforeConnecting() {
        Map<String, String> settings = ValidSettings.required();
        // nothing listens there: the refusal must come first
        settings.put("postgres.url", "jdbc:postgresql://127.0.0.1:1/none");
        settings.put("postgres.sink.prefix", "payments");
        settings.put("postgres.user", "onceflow");
        settings.put("dedup.ttl", "3d");

        assertThatThrownBy(() -> RetentionCommand.execute(args(settings, "--keep", "2d")))
                .isInstanceOf(ConfigException.class)
                .hasMessageContaining("--keep: is 2d, shorter than dedup.ttl (3d)");
    }
}
