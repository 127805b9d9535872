package io.onceflow.tools.effects;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.onceflow.config.ConfigException;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The refusals of {@code bin/onceflow effects retry-failed}, which all come before it connects
 * anywhere (nothing listens at the URL). What it queues is {@code RetryFailedEffectsTest}'s, against
 * a real server.
 */
class EffectsCommandTest {
    private static final Map<String, String> JOB = Map.of(
            "kafka.bootstrap.servers", "kafka-1:9092",
            "input.topics", "payments",
            "input.group.id", "onceflow-payments",
            "output.topic", "payments-deduplicated",
            "dead.letter.topic", "payments-dead-letters",
            "kafka.transactional.id.prefix", "onceflow-payments",
            "postgres.url", "jdbc:postgresql://127.0.0.1:1/none",
            "postgres.user", "onceflow",
            "postgres.sink.prefix", "payments",
            "postgres.effect.function", "ledger.apply_payment");

    private static String[] retryFailed(Map<String, String> settings, String... more) {
        List<String> args = new ArrayList<>(List.of(EffectsCommand.RETRY_FAILED));
        settings.forEach((key, value) -> args.addAll(List.of("--" + key, value)));
        args.addAll(List.of(more));
        return args.toArray(String[]::new);
    }

    @Test
    void neitherIdsNorAllIsRefusedWithTheConfigurationsProblems() {
        Map<String, String> settings = new HashMap<>(JOB);
        settings.remove("input.topics");

        assertThatThrownBy(() -> EffectsCommand.execute(retryFailed(settings)))
                .isInstanceOfSatisfying(ConfigException.class, e -> assertThat(e.problems())
                        .contains("--id: is not given, nor --all: nothing says which effects to act on."
                                + " Name each with --id ID (repeat it), or give --all for every effect of the sink"
                                + " recorded as failed.")
                        .anyMatch(problem -> problem.startsWith("input.topics: is required")));
    }

    @Test
    void idsAndAllTogetherOrAnEmptyIdAreRefused() {
        assertThatThrownBy(() -> EffectsCommand.execute(retryFailed(JOB, "--id", "p1", "--all")))
                .isInstanceOfSatisfying(ConfigException.class, e -> assertThat(e.problems()).containsExactly(
                        "--all: is given with --id. Give either the ids (--id ID, repeated) or --all, not both."));
        assertThatThrownBy(() -> EffectsCommand.execute(retryFailed(JOB, "--id", "p1", "--id=")))
                .isInstanceOfSatisfying(ConfigException.class, e -> assertThat(e.problems()).containsExactly(
                        "--id: is empty. Give a message id after each --id."));
    }

    @Test
    void theSubcommandComesFirstAndASettingInItsPlaceIsNotEchoed() {
        assertThatThrownBy(() -> EffectsCommand.execute(new String[0]))
                .isInstanceOfSatisfying(ConfigException.class, e -> assertThat(e.problems()).containsExactly(
                        "effects: needs its subcommand first (retry-failed, retry-rejected, skip), and got nothing. Run"
                        + " bin/onceflow effects retry-failed --config job.properties --id ID (or --all); bin/onceflow"
                        + " effects --help says more."));
        assertThatThrownBy(() -> EffectsCommand.execute(new String[] {"retry", "--all"}))
                .hasMessageContaining("and got 'retry'");
        assertThatThrownBy(() -> EffectsCommand.execute(new String[] {"--postgres.password=hunter2", "retry-failed"}))
                .hasMessageContaining("and got another argument")
                .hasMessageNotContaining("hunter2");
    }

    @Test
    void aJobWithoutPostgresOrWithoutAnEffectFunctionHasNothingToReDrive() {
        Map<String, String> withoutPostgres = new HashMap<>(JOB);
        withoutPostgres.keySet().removeIf(key -> key.startsWith("postgres."));
        assertThatThrownBy(() -> EffectsCommand.execute(retryFailed(withoutPostgres, "--all")))
                .isInstanceOf(ConfigException.class)
                .hasMessageContaining("postgres.url: is not set: the job has no PostgreSQL sink, so no effect");

        Map<String, String> withoutFunction = new HashMap<>(JOB);
        withoutFunction.remove("postgres.effect.function");
        assertThatThrownBy(() -> EffectsCommand.execute(retryFailed(withoutFunction, "--id", "p1")))
                .isInstanceOf(ConfigException.class)
                .hasMessageContaining("postgres.effect.function: is not set: effects queued again would wait for a"
                        + " job with an effect function");
    }

    @Test
    void helpNeedsNoSubcommandAndNoSettings() throws Exception {
        PrintStream console = System.out;
        ByteArrayOutputStream printed = new ByteArrayOutputStream();
        try {
            System.setOut(new PrintStream(printed, true, StandardCharsets.UTF_8));
            EffectsCommand.execute(new String[] {"--help"});
        } finally {
            System.setOut(console);
        }
        assertThat(printed.toString(StandardCharsets.UTF_8))
                .startsWith("Usage: bin/onceflow effects retry-failed [--config FILE] [settings...] (--id ID [--id ID]..."
                        + " | --all)")
                .contains("postgres.effect.function");
    }
}
