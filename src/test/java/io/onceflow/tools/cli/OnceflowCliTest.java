package io.onceflow.tools.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.onceflow.config.ConfigException;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/**
 * The dispatch of {@code bin/onceflow}'s commands, in this JVM ({@code execute}: {@code main} would
 * end the test's process).
 */
class OnceflowCliTest {
    private static String stdoutOf(ThrowingRunnable command) throws Exception {
        PrintStream original = System.out;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
        try {
            command.run();
        } finally {
            System.setOut(original);
        }
        return captured.toString(StandardCharsets.UTF_8);
    }

    @FunctionalInterface
    private interface ThrowingRunnable {
        void run() throws Exception;
    }

    @Test
    void helpListsEveryCommandAndNoArgumentsIsHelp() throws Exception {
        String help = stdoutOf(() -> OnceflowCli.execute(new String[] {"help"}));

        assertThat(help).startsWith("Usage: bin/onceflow <command>")
                .contains("  check     ", "  ddl       ", "  audit     ", "  retention ", "  effects   retry-failed",
                        "  run       ", "  local-services ", "flink run");
        assertThat(stdoutOf(() -> OnceflowCli.execute(new String[0]))).isEqualTo(help);
        assertThat(stdoutOf(() -> OnceflowCli.execute(new String[] {"--help"}))).isEqualTo(help);
    }

    @Test
    void eachCommandIsTheJobWithItsFlag() {
        assertThat(OnceflowCli.withFlag("check", new String[] {"--config", "job.properties"}))
                .containsExactly("--check", "--config", "job.properties");
        assertThat(OnceflowCli.Command.named("run")).contains(OnceflowCli.Command.RUN);
        assertThat(OnceflowCli.Command.named("effects")).contains(OnceflowCli.Command.EFFECTS);
        assertThat(OnceflowCli.Command.named("retention")).contains(OnceflowCli.Command.RETENTION);
    }

    @Test
    void theDdlNeedsNoSinkPrefix() throws Exception {
        String ddl = stdoutOf(() -> OnceflowCli.execute(new String[] {"ddl", "--postgres.url=jdbc:postgresql://db/x",
            "--postgres.user", "onceflow", "--postgres.table", "ledger.events"}));

        assertThat(ddl).contains("CREATE TABLE IF NOT EXISTS ledger.events", "onceflow_commit_log");
    }

    @Test
    void effectsNeedsItsSubcommand() {
        assertThatThrownBy(() -> OnceflowCli.execute(new String[] {"effects", "--config", "job.properties"}))
                .isInstanceOfSatisfying(ConfigException.class, e -> assertThat(e.problems()).singleElement()
                        .asString().startsWith("effects: needs its subcommand first (retry-failed, retry-rejected, skip)"));
    }

    @Test
    void anUnknownCommandIsNamedAndAnArgumentInItsPlaceIsNotEchoed() {
        assertThatThrownBy(() -> OnceflowCli.execute(new String[] {"chek", "--config", "job.properties"}))
                .isInstanceOfSatisfying(ConfigException.class, e -> assertThat(e.problems()).singleElement()
                        .asString().startsWith("command: 'chek' is not one of check, ddl, audit, retention, effects, run."));
        assertThatThrownBy(() -> OnceflowCli.execute(new String[] {"--postgres.password=hunter2", "check"}))
                .isInstanceOfSatisfying(ConfigException.class, e -> assertThat(e.problems()).singleElement()
                        .asString().startsWith("command: the first argument is not one of")
                        .doesNotContain("hunter2"));
    }
}
