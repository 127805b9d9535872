package io.onceflow.config;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class FromArgsTest {
    @TempDir Path directory;

    private static String[] argumentsFor(Map<String, String> settings) {
        List<String> arguments = new ArrayList<>();
        settings.forEach(
                (key, value) -> {
                    arguments.add("--" + key);
                    arguments.add(value);
                });
        return arguments.toArray(String[]::new);
    }

    private static String[] concat(String[] first, String... second) {
        List<String> all = new ArrayList<>(List.of(first));
        all.addAll(List.of(second));
        return all.toArray(String[]::new);
    }

    private Path writeConfigFile(String content) throws IOException {
        Path file = directory.resolve("onceflow.properties");
        Files.writeString(file, content, StandardCharsets.UTF_8);
        return file;
    }

    @Test
    void keyValuePairsAreRead() {
        String[] args = concat(argumentsFor(ValidSettings.required()), "--parallelism", "3");

        OnceflowConfig config = OnceflowConfig.fromArgs(args, Map.of());

        assertThat(config.inputTopics()).containsExactly("payments", "refunds");
        assertThat(config.parallelism()).hasValue(3);
    }

    @Test
    void aValueMayStartWithDashes() {
        Map<String, String> settings = ValidSettings.withPostgres("--pass--");

        OnceflowConfig config = OnceflowConfig.fromArgs(argumentsFor(settings), Map.of());

        assertThat(config.postgres().orElseThrow().password()).isEqualTo("--pass--");
    }

    @Test
    void keyGivenTwiceIsReported() {
        String[] args =
                concat(
                        argumentsFor(ValidSettings.required()),
                        "--parallelism", "2", "--parallelism", "3");

        assertThat(ConfigProblems.ofArguments(args))
                .containsExactly("parallelism: is given more than once. Give it once.");
    }

    @Test
    void configFileIsLoadedAndArgumentsOverrideIt() throws IOException {
        Path file =
                writeConfigFile(
                        """
                        # Written by operations
                        kafka.bootstrap.servers = file-kafka:9092
                        input.topics = payments
                        input.group.id = from-file
                        output.topic = out
                        dead.letter.topic = dlq
                        kafka.transactional.id.prefix = from-file
                        dedup.ttl = 1d
                        """);

        OnceflowConfig config =
                OnceflowConfig.fromArgs(
                        new String[] {
                            "--input.group.id", "from-arguments", "--config", file.toString()
                        },
                        Map.of());

        assertThat(config.groupId()).isEqualTo("from-arguments");
        assertThat(config.bootstrapServers()).isEqualTo("file-kafka:9092");
        assertThat(config.transactionalIdPrefix()).isEqualTo("from-file");
        assertThat(config.dedupTtl()).hasDays(1);
    }

    @Test
    void configFileIsReadAsUtf8() throws IOException {
        Path file = writeConfigFile("input.group.id = zahlungen-ä\n");
        String[] args = concat(argumentsFor(withoutGroupId()), "--config", file.toString());

        assertThat(OnceflowConfig.fromArgs(args, Map.of()).groupId()).isEqualTo("zahlungen-ä");
    }

    @Test
    void aLaterConfigFileOverridesAnEarlierOneAndArgumentsOverrideBoth() throws IOException {
        Path job = writeConfigFile("""
                kafka.bootstrap.servers = ${KAFKA_BOOTSTRAP_SERVERS}
                input.topics = payments
                input.group.id = from-job-file
                output.topic = out
                dead.letter.topic = dlq
                kafka.transactional.id.prefix = from-job-file
                """);
        Path local = directory.resolve("local.properties");
        Files.writeString(local, "kafka.bootstrap.servers = localhost:9092\ninput.group.id = from-local-file\n");

        OnceflowConfig config = OnceflowConfig.fromArgs(new String[] {"--config", job.toString(), "--config",
            local.toString(), "--kafka.transactional.id.prefix", "from-arguments"}, Map.of());

        assertThat(config.bootstrapServers()).as("the job file's ${...} is overridden before it is resolved")
                .isEqualTo("localhost:9092");
        assertThat(config.groupId()).isEqualTo("from-local-file");
        assertThat(config.inputTopics()).containsExactly("payments");
        assertThat(config.transactionalIdPrefix()).isEqualTo("from-arguments");
    }

    private static Map<String, String> withoutGroupId() {
        Map<String, String> settings = ValidSettings.required();
        settings.remove("input.group.id");
        return settings;
    }

    @Test
    void keysInTheConfigFileAreValidatedLikeArguments() throws IOException {
        Path file = writeConfigFile("dedup.tll = 1d\nparallelism = many\n");
        String[] args =
                concat(argumentsFor(ValidSettings.required()), "--config", file.toString());

        assertThat(ConfigProblems.ofArguments(args))
                .containsExactly(
                        "dedup.tll: unknown key 'dedup.tll'; did you mean 'dedup.ttl'? Rename it.",
                        "parallelism: 'many' is not a whole number from 1 to 32768. Use a whole"
                                + " number from 1 to 32768.");
    }

    @Test
    void unreadableConfigFileIsReportedTogetherWithOtherProblems() {
        Path missing = directory.resolve("missing.properties");

        List<String> problems = ConfigProblems.ofArguments("--config", missing.toString());

        assertThat(problems.get(0))
                .startsWith("--config: cannot read '" + missing + "'")
                .contains("NoSuchFileException");
        // The required keys are all missing, and reported too.
        assertThat(problems).hasSize(1 + ValidSettings.required().size());
    }

    @Test
    void bareValueIsReportedByPositionWithoutShowingIt() {
        String[] args = concat(argumentsFor(ValidSettings.required()), "s3cr3t-value");

        assertThat(ConfigProblems.ofArguments(args))
                .containsExactly(
                        "command line: argument " + args.length + " is not a --key. Pass settings"
                                + " as --key value or --key=value.");
    }

    @Test
    void lastKeyWithoutValueIsReported() {
        String[] args = concat(argumentsFor(ValidSettings.required()), "--parallelism");

        assertThat(ConfigProblems.ofArguments(args))
                .containsExactly(
                        "parallelism: has no value. Pass it as --parallelism followed by a value.");
    }

    @Test
    void doubleDashAloneIsNotAKey() {
        String[] args = concat(argumentsFor(ValidSettings.required()), "--", "x");

        assertThat(ConfigProblems.ofArguments(args)).hasSize(2).allMatch(p -> p.startsWith("command line: "));
    }

    @Test
    void keyEqualsValueIsReadLikeKeySpaceValue() {
        String[] args = concat(argumentsFor(ValidSettings.required()), "--parallelism=3", "--postgres.url=jdbc:postgresql://db/x?a=b",
                "--postgres.user=onceflow", "--postgres.sink.prefix=payments", "--postgres.password=");

        OnceflowConfig config = OnceflowConfig.fromArgs(args, Map.of());

        assertThat(config.parallelism()).hasValue(3);
        assertThat(config.postgres().orElseThrow().url()).isEqualTo("jdbc:postgresql://db/x?a=b");
        // an empty value counts as not set, as in the space form
        assertThat(config.postgres().orElseThrow().password()).isEmpty();
    }

    @Test
    void nothingAfterTheEqualsSignOfAnUnknownOrMalformedArgumentIsEchoed() {
        String secret = "S3cr3t-after-equals";
        String[] args = {"--postgres.passwrd=" + secret, "--=" + secret, "-p=" + secret, "--postgres.password=" + secret};

        List<String> problems = ConfigProblems.ofArguments(args);

        assertThat(problems).noneMatch(problem -> problem.contains(secret));
        assertThat(problems).contains(
                "postgres.passwrd: unknown key 'postgres.passwrd'; did you mean 'postgres.password'? Rename it.",
                "command line: argument 2 is not a --key. Pass settings as --key value or --key=value.",
                "command line: argument 3 is not a --key. Pass settings as --key value or --key=value.");
    }

    @Test
    void aSecretKeyGivenTwiceInBothFormsIsReportedWithoutItsValue() {
        String[] args = concat(argumentsFor(ValidSettings.withPostgres("first-Secret")), "--postgres.password=second-Secret");

        assertThat(ConfigProblems.ofArguments(args))
                .containsExactly("postgres.password: is given more than once. Give it once.");
    }

    @Test
    void helpAndFlagsAreNotSettings() {
        ProgramArguments arguments = ProgramArguments.parse(
                concat(argumentsFor(ValidSettings.required()), "--print-postgres-ddl", "-h"),
                java.util.Set.of("print-postgres-ddl"), java.util.Set.of());

        assertThat(arguments.flag("print-postgres-ddl")).isTrue();
        assertThat(arguments.config(Map.of()).inputTopics()).containsExactly("payments", "refunds");
    }
}
