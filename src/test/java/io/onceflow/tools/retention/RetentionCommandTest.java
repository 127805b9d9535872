package io.onceflow.tools.retention;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.onceflow.config.ConfigException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The command's refusals, which come before it connects anywhere (so no database here: the purge
 * itself is {@code RetentionTest}'s).
 */
class RetentionCommandTest {
    private static final Map<String, String> JOB = Map.of(
            "kafka.bootstrap.servers", "kafka-1:9092",
            "input.topics", "payments",
            "input.group.id", "onceflow-payments",
            "output.topic", "payments-deduplicated",
            "dead.letter.topic", "payments-dead-letters",
            "kafka.transactional.id.prefix", "onceflow-payments");

    private static String[] args(Map<String, String> settings, String... more) {
        List<String> args = new ArrayList<>();
        settings.forEach((key, value) -> args.addAll(List.of("--" + key, value)));
        args.addAll(List.of(more));
        return args.toArray(String[]::new);
    }

    @Test
    void aMissingWindowIsReportedWithTheConfigurationsProblems() {
        assertThatThrownBy(() -> RetentionCommand.run(new String[] {"--dedup.ttl", "forever"}))
                .isInstanceOfSatisfying(ConfigException.class, e -> assertThat(e.problems())
                        .contains("--keep: is required. Give the retention window, e.g. --keep 14d (see --help).")
                        .anyMatch(problem -> problem.startsWith("dedup.ttl: 'forever' is not a duration"))
                        .anyMatch(problem -> problem.startsWith("kafka.bootstrap.servers: is required")));
    }

    @Test
    void aJobWithoutPostgresHasNothingToPurge() {
        assertThatThrownBy(() -> RetentionCommand.run(args(JOB, "--keep", "14d")))
                .isInstanceOf(ConfigException.class)
                .hasMessageContaining("postgres.url: is not set: there is no PostgreSQL table to purge");
    }

    @Test
    void aWindowShorterThanTheJobsDedupTtlIsRefusedBeforeConnecting() {
        Map<String, String> settings = new HashMap<>(JOB);
        // nothing listens there: the refusal must come first
        settings.put("postgres.url", "jdbc:postgresql://127.0.0.1:1/none");
        settings.put("postgres.sink.prefix", "payments");
        settings.put("postgres.user", "onceflow");
        settings.put("dedup.ttl", "3d");

        assertThatThrownBy(() -> RetentionCommand.run(args(settings, "--keep", "2d")))
                .isInstanceOf(ConfigException.class)
                .hasMessageContaining("--keep: is 2d, shorter than dedup.ttl (3d)");
    }
}
