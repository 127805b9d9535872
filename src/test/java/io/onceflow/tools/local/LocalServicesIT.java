package io.onceflow.tools.local;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.onceflow.cli.ExitCode;
import io.onceflow.job.OnceflowJob;
import java.io.BufferedReader;
import java.io.StringReader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.DriverManager;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code bin/onceflow local-services} as the quick start uses it: the example's topics and ledger, a
 * settings file that, after the example's own {@code job.properties}, passes the job's check against
 * the services; records sent are read back; a second start in the same directory is refused; closing
 * stops both services and deletes their data.
 */
class LocalServicesIT {
    private static final Path EXAMPLE = Path.of("examples/payments-ledger");

    @TempDir
    Path directory;

    @Test
    void theSettingsFileAfterTheJobsOwnPassesTheCheckAndCloseLeavesNothing() throws Exception {
        Path data = directory.resolve("local-services");
        String postgresUrl;
        try (LocalServices services = LocalServices.start(data,
                Map.of("payments", 2, "payments-accepted", 1, "payments-dead-letters", 1, "payments-outcomes", 1),
                List.of(EXAMPLE.resolve("src/main/resources/db/ledger.sql")))) {
            Path settings = services.settingsFile();
            postgresUrl = services.settings().get("postgres.url");

            assertThat(OnceflowJob.execute(new String[] {"--check", "--config", EXAMPLE.resolve("job.properties").toString(),
                "--config", settings.toString()}, Optional.empty())).isEqualTo(ExitCode.CLEAN);
            String bootstrapServers = services.settings().get("kafka.bootstrap.servers");
            int sent = LocalServices.send(bootstrapServers, "payments", new BufferedReader(new StringReader("""
                    pay-1 {"type": "payment", "user_id": 1, "amount": 10.00, "currency": "RUB"}

                    pay-2 {"type": "payment", "user_id": 2, "amount": 5, "currency": "RUB"}
                    """)));
            assertThat(sent).isEqualTo(2);
            assertThat(LocalServices.read(bootstrapServers, "payments")).containsExactlyInAnyOrder(
                    "pay-1 {\"type\": \"payment\", \"user_id\": 1, \"amount\": 10.00, \"currency\": \"RUB\"}",
                    "pay-2 {\"type\": \"payment\", \"user_id\": 2, \"amount\": 5, \"currency\": \"RUB\"}");
            assertThatThrownBy(() -> LocalServices.start(data, Map.of(), List.of()))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("run already");
        }

        assertThat(data).doesNotExist();
        assertThatThrownBy(() -> DriverManager.getConnection(postgresUrl, "postgres", "").close())
                .as("PostgreSQL stopped").hasMessageContaining("Connection");
    }

    @Test
    void aDirectoryOfSomethingElseIsNeverEmptied() throws Exception {
        Files.writeString(directory.resolve("notes.txt"), "mine");

        assertThatThrownBy(() -> LocalServices.start(directory, Map.of(), List.of()))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("is not empty");
        assertThat(directory.resolve("notes.txt")).hasContent("mine");
    }
}
