package io.onceflow.job;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.config.OnceflowConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The fresh-start refusal names the job's real jar and arguments, never a secret. */
class ResumeCommandTest {
    /** The required settings and a PostgreSQL sink with {@code password}. */
    private static OnceflowConfig withPostgresPassword(String password) {
        Map<String, String> settings = new HashMap<>(OnceflowJobTest.REQUIRED);
        settings.put("postgres.url", "jdbc:postgresql://db:5432/payments");
        settings.put("postgres.user", "onceflow");
        settings.put("postgres.password", password);
        settings.put("postgres.sink.prefix", "payments");
        return OnceflowConfig.fromMap(settings, Map.of());
    }

    @Test
    void namesTheMainClassesJarAndTheArgumentsQuotedWithSecretsRedacted() {
        OnceflowConfig config = withPostgresPassword("s3cret-pw");
        String[] args = {"--config", "/etc/onceflow/job one.properties", "--postgres.password", "s3cret-pw",
                "--input.group.id=it's-mine"};

        // any class from a jar stands for the job's main class: JUnit's is on the test classpath
        String command = ResumeCommand.of(Test.class, args, config).flinkRunFrom("/checkpoints/abc/chk-7");

        assertThat(command)
                .startsWith("flink run -s /checkpoints/abc/chk-7 ")
                .containsPattern("/junit-jupiter-api-[^/ ]+\\.jar ")
                .contains(" --config '/etc/onceflow/job one.properties' --postgres.password '******' ")
                .contains("'--input.group.id=it'\\''s-mine'")
                .endsWith("(give the ****** secrets as before)")
                .doesNotContain("s3cret-pw");
    }

    @Test
    void theRefusalsAdviceIsTheCommandForTheLatestRetainedCheckpoint(@TempDir Path checkpoints) throws Exception {
        Path latest = Files.createDirectories(checkpoints.resolve("job-1").resolve("chk-12"));
        Files.writeString(latest.resolve("_metadata"), "");
        Files.createDirectories(checkpoints.resolve("job-1").resolve("chk-13")); // no metadata: not retained
        ResumeCommand resume = new ResumeCommand("/opt/jobs/payments.jar", "--config job.properties");

        assertThat(JobStart.resumeAdvice(Optional.of(checkpoints.toString()), Optional.of("job-1"), resume))
                .endsWith("resume with: flink run -s file:" + latest
                        + " /opt/jobs/payments.jar --config job.properties.");
    }

    @Test
    void withoutACommandLineItSaysWhatToFillIn() {
        assertThat(ResumeCommand.UNKNOWN.flinkRunFrom("<chk-n directory>"))
                .isEqualTo("flink run -s <chk-n directory> <job jar> <the same arguments>");
    }

    /** Redacted before quoting: quoted, it's-s3cret would become 'it'\''s-s3cret' and no longer match. */
    @Test
    void aPasswordWithASingleQuoteIsRedacted() {
        OnceflowConfig config = withPostgresPassword("it's-s3cret");
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
