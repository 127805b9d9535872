package io.onceflow.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.InstanceOfAssertFactories.STRING;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.AccessDeniedException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ValueSubstitutionTest {
    private static final String SECRET = "s3cr3t-from-a-file";

    private static ValueSubstitution.Result substitute(String text, Map<String, String> environment) {
        return ValueSubstitution.of(environment).substitute(text);
    }

    /** Files in memory, by absolute path; any other path does not exist. */
    static ValueSubstitution.FileOpener files(Map<String, String> contents) {
        return path -> {
            String content = contents.get(path.toString());
            if (content == null) {
                throw new NoSuchFileException(path.toString());
            }
            return new ByteArrayInputStream(content.getBytes(StandardCharsets.UTF_8));
        };
    }

    private static ValueSubstitution.Result substituteFiles(String text, ValueSubstitution.FileOpener files) {
        return new ValueSubstitution(Map.of(), files).substitute(text);
    }

    private static List<String> whatIsWrong(ValueSubstitution.Result result) {
        return result.problems().stream().map(ValueSubstitution.Problem::whatIsWrong).toList();
    }

    @Test
    void definedVariablesAreReplacedAnywhereInTheValue() {
        var result =
                substitute(
                        "kafka-${ENVIRONMENT}-${REGION}:9092",
                        Map.of("ENVIRONMENT", "prod", "REGION", "eu"));

        assertThat(result.value()).isEqualTo("kafka-prod-eu:9092");
        assertThat(result.problems()).isEmpty();
    }

    @Test
    void defaultIsUsedWhenTheVariableIsUnsetOrEmpty() {
        assertThat(substitute("${PORT:-9092}", Map.of()).value()).isEqualTo("9092");
        assertThat(substitute("${PORT:-9092}", Map.of("PORT", "")).value()).isEqualTo("9092");
        assertThat(substitute("${PORT:-9092}", Map.of("PORT", "9093")).value()).isEqualTo("9093");
        assertThat(substitute("${PORT:-}", Map.of()).value()).isEmpty();
    }

    @Test
    void undefinedVariableWithoutDefaultIsNamed() {
        var result = substitute("${USER_NAME}:${PASSWORD}", Map.of("USER_NAME", "svc"));

        assertThat(whatIsWrong(result))
                .containsExactly("refers to the environment variable PASSWORD, which is not set");
    }

    @Test
    void setButEmptyVariableWithoutDefaultIsEmpty() {
        var result = substitute("a${EMPTY}b", Map.of("EMPTY", ""));

        assertThat(result.value()).isEqualTo("ab");
        assertThat(result.problems()).isEmpty();
    }

    @Test
    void replacementTextIsTakenLiterally() {
        assertThat(substitute("${PASSWORD}", Map.of("PASSWORD", "a$1\\b${X}")).value())
                .isEqualTo("a$1\\b${X}");
        assertThat(substituteFiles("${file:/s/pw}", files(Map.of("/s/pw", "a$1\\b${X}${file:/s/pw}"))).value())
                .isEqualTo("a$1\\b${X}${file:/s/pw}");
    }

    @Test
    void kafkaConfigProviderReferencesAreLeftForKafka() {
        for (String reference : List.of("${file:/etc/kafka/secrets.properties:truststore.password}",
                "${directory:/mnt/secrets:password}", "${file:relative/path}")) {
            var result = substituteFiles(reference, files(Map.of("/etc/kafka/secrets.properties", "x")));

            assertThat(result.value()).isEqualTo(reference);
            assertThat(result.problems()).isEmpty();
        }
    }

    @Test
    void aFileReferenceIsReplacedByTheFilesContentWithoutOneTrailingLineBreak() {
        var opener = files(Map.of("/s/pw", SECRET + "\n", "/s/crlf", SECRET + "\r\n", "/s/two", " a b \n\n",
                "/s/jaas", "ScramLoginModule required\n  username=\"svc\" password=\"p\";"));

        assertThat(substituteFiles("${file:/s/pw}", opener).value()).isEqualTo(SECRET);
        assertThat(substituteFiles("${file:/s/crlf}", opener).value()).isEqualTo(SECRET);
        assertThat(substituteFiles("[${file:/s/two}]", opener).value()).as("only one line break, nothing else")
                .isEqualTo("[ a b \n]");
        assertThat(substituteFiles("${file:/s/jaas}", opener).value())
                .isEqualTo("ScramLoginModule required\n  username=\"svc\" password=\"p\";");
        assertThat(substituteFiles("user:${file:/s/pw}@${HOST:-db}", opener).value()).isEqualTo("user:" + SECRET + "@db");
    }

    @Test
    void anUnusableFileIsAProblemNamingThePathAndTheFix() {
        ValueSubstitution.FileOpener opener = path -> switch (path.toString()) {
            case "/s/denied" -> throw new AccessDeniedException(path.toString());
            case "/s/large" -> new ByteArrayInputStream(new byte[ValueSubstitution.MAX_FILE_BYTES + 1]);
            case "/s/binary" -> new ByteArrayInputStream(new byte[] {SECRET.getBytes()[0], (byte) 0xfe, (byte) 0xff});
            default -> throw new NoSuchFileException(path.toString());
        };

        assertThat(substituteFiles("${file:/s/missing}", opener).problems()).containsExactly(new ValueSubstitution.Problem(
                "refers to the file /s/missing, which does not exist",
                "Mount or create it where the job's main method runs (the machine of flink run, or the JobManager"
                        + " for an application-mode or REST submission), or correct the path."));
        assertThat(whatIsWrong(substituteFiles("${file:/s/denied}", opener)))
                .containsExactly("refers to the file /s/denied, which this process may not read");
        assertThat(whatIsWrong(substituteFiles("${file:/s/large}", opener)))
                .containsExactly("refers to the file /s/large, which is larger than 1 MiB");
        assertThat(whatIsWrong(substituteFiles("${file:/s/binary}", opener)))
                .containsExactly("refers to the file /s/binary, which is not UTF-8 text");
        assertThat(substituteFiles("a${file:/s/missing}b", opener).value()).isEqualTo("ab");
    }

    @Test
    void theFilesOfThisMachineAreRead(@TempDir Path directory) throws IOException {
        Path secret = Files.writeString(directory.resolve("postgres-password"), SECRET + "\n");
        Files.write(directory.resolve("large"), new byte[ValueSubstitution.MAX_FILE_BYTES + 1]);

        assertThat(substitute("${file:" + secret + "}", Map.of()).value()).isEqualTo(SECRET);
        assertThat(whatIsWrong(substitute("${file:" + directory.resolve("missing") + "}", Map.of())))
                .containsExactly("refers to the file " + directory.resolve("missing") + ", which does not exist");
        assertThat(whatIsWrong(substitute("${file:" + directory + "}", Map.of())))
                .containsExactly("refers to the file " + directory + ", which cannot be read (it is a directory)");
        assertThat(whatIsWrong(substitute("${file:" + directory.resolve("large") + "}", Map.of())))
                .containsExactly("refers to the file " + directory.resolve("large") + ", which is larger than 1 MiB");
    }

    @Test
    void substitutedValuesAreValidatedAndUsed() {
        var settings = ValidSettings.required();
        settings.put("kafka.bootstrap.servers", "${KAFKA_HOST}:${KAFKA_PORT:-9092}");
        settings.put("parallelism", "${PARALLELISM:-}");

        OnceflowConfig config =
                OnceflowConfig.fromMap(settings, Map.of("KAFKA_HOST", "broker.internal"));

        assertThat(config.bootstrapServers()).isEqualTo("broker.internal:9092");
        assertThat(config.parallelism()).isEmpty();
    }

    @Test
    void undefinedVariableIsAProblemNamingKeyAndVariable() {
        var settings = ValidSettings.withPostgres("${PGPASSWORD}");

        assertThat(ConfigProblems.of(settings))
                .containsExactly(
                        "postgres.password: refers to the environment variable PGPASSWORD, which"
                                + " is not set. Set PGPASSWORD, or give a default as"
                                + " ${PGPASSWORD:-default}.");
    }

    @Test
    void undefinedVariableInARequiredKeyIsNotAlsoReportedAsMissing() {
        var settings = ValidSettings.required();
        settings.put("input.group.id", "${GROUP}");

        assertThat(ConfigProblems.of(settings))
                .singleElement(STRING)
                .startsWith("input.group.id: refers to the environment variable GROUP");
    }

    @Test
    void anUnusableFileIsReportedWithEveryOtherProblemAndTheRequiredKeyIsNotAlsoMissing() {
        var settings = ValidSettings.withPostgres("${file:/var/run/secrets/onceflow/postgres-password}");
        settings.put("input.group.id", "${file:/var/run/secrets/onceflow/group}");
        settings.put("dedup.ttl", "forever");
        settings.put("kafka.properties.sasl.jaas.config", "${file:/var/run/secrets/onceflow/kafka-jaas}");
        var opener = files(Map.of("/var/run/secrets/onceflow/kafka-jaas", SECRET));

        List<String> problems = ConfigProblems.of(settings, new ValueSubstitution(Map.of(), opener));

        assertThat(problems).hasSize(3).noneMatch(problem -> problem.contains(SECRET));
        assertThat(problems.get(0)).isEqualTo("input.group.id: refers to the file /var/run/secrets/onceflow/group,"
                + " which does not exist. Mount or create it where the job's main method runs (the machine of flink"
                + " run, or the JobManager for an application-mode or REST submission), or correct the path.");
        assertThat(problems.get(1))
                .startsWith("postgres.password: refers to the file /var/run/secrets/onceflow/postgres-password, which does not exist.");
        assertThat(problems.get(2)).startsWith("dedup.ttl: ");
    }
}
