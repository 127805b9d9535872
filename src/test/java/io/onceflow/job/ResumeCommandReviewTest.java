package io.onceflow.job;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.config.OnceflowConfig;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * Review of issue 34 (adversarial): the resume command quotes each argument for the shell before the
 * secrets are redacted, so a secret containing a single quote no longer appears verbatim and is printed
 * (in its shell-escaped form) in the fresh-start refusal.
 */
class ResumeCommandReviewTest {
    @Test
    void aPasswordWithASingleQuoteIsRedacted() {
        Map<String, String> settings = new HashMap<>(OnceflowJobTest.REQUIRED);
        settings.put("postgres.url", "jdbc:postgresql://db:5432/payments");
        settings.put("postgres.user", "onceflow");
        settings.put("postgres.password", "it's-s3cret");
        settings.put("postgres.sink.prefix", "payments");
        OnceflowConfig config = OnceflowConfig.fromMap(settings, Map.of());
        String[] args = {"--postgres.password", "it's-s3cret"};

        String command = ResumeCommand.of(Test.class, args, config).flinkRunFrom("/checkpoints/abc/chk-7");

        assertThat(command).doesNotContain("s3cret");
    }

    /** Kafka's JAAS parser accepts single quotes (java.io.StreamTokenizer), which the shell quoting escapes. */
    @Test
    void aJaasConfigWithSingleQuotesIsRedacted() {
        String jaas = "org.apache.kafka.common.security.scram.ScramLoginModule required username='svc'"
                + " password='kafka-Pa55';";
        Map<String, String> settings = new HashMap<>(OnceflowJobTest.REQUIRED);
        settings.put("kafka.properties.sasl.jaas.config", jaas);
        OnceflowConfig config = OnceflowConfig.fromMap(settings, Map.of());
        String[] args = {"--kafka.properties.sasl.jaas.config=" + jaas};

        String command = ResumeCommand.of(Test.class, args, config).flinkRunFrom("/checkpoints/abc/chk-7");

        assertThat(command).doesNotContain("kafka-Pa55");
    }
}
