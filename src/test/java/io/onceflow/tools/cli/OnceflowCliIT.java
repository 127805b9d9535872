package io.onceflow.tools.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.onceflow.cli.CannotRunException;
import io.onceflow.cli.ExitCode;
import io.onceflow.job.OnceflowJob;
import io.onceflow.testing.TestKafka;
import io.onceflow.testing.TestPostgres;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * {@code bin/onceflow check} and a job started outside Flink without {@code run}, against a real
 * broker and a real PostgreSQL: problems are reported, and neither creates a table or registers a
 * run (the job's start would create all five tables).
 */
class OnceflowCliIT {
    private final TestKafka kafka = TestKafka.shared();
    private TestPostgres.TestDatabase database;
    private String in;
    private String out;
    private String dlq;

    @BeforeEach
    void topicsAndDatabase() {
        in = TestKafka.uniqueTopic("cli-in");
        out = TestKafka.uniqueTopic("cli-out");
        dlq = TestKafka.uniqueTopic("cli-dlq");
        database = TestPostgres.shared().newDatabase();
    }

    private String[] arguments(String command) {
        List<String> args = new ArrayList<>(List.of(command, "--kafka.bootstrap.servers", kafka.bootstrapServers(),
                "--input.topics", in, "--input.group.id", "cli", "--output.topic", out, "--dead.letter.topic", dlq,
                "--kafka.transactional.id.prefix", "cli", "--postgres.url", database.jdbcUrl().replaceFirst("\\?.*$", ""),
                "--postgres.user", database.user(), "--postgres.password", database.password(),
                "--postgres.sink.prefix", "cli"));
        return args.toArray(String[]::new);
    }

    private List<String> tables() throws Exception {
        return database.rows("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'");
    }

    @Test
    void theCheckReportsMissingTopicsAndCreatesNothing() throws Exception {
        kafka.createTopics(1, in);

        assertThatThrownBy(() -> OnceflowCli.execute(arguments("check")))
                .isInstanceOfSatisfying(CannotRunException.class, e -> assertThat(e.problems()).containsExactly(
                        "output.topic: the topic '" + out + "' does not exist on " + kafka.bootstrapServers()
                                + ". onceflow does not create topics: create it, e.g. kafka-topics.sh --bootstrap-server "
                                + kafka.bootstrapServers() + " --create --topic " + out + " --partitions 1.",
                        "dead.letter.topic: the topic '" + dlq + "' does not exist on " + kafka.bootstrapServers()
                                + ". onceflow does not create topics: create it, e.g. kafka-topics.sh --bootstrap-server "
                                + kafka.bootstrapServers() + " --create --topic " + dlq + " --partitions 1."));
        assertThat(tables()).isEmpty();
    }

    @Test
    void aPassedCheckStartsNothingAndNeitherDoesTheJobOutsideFlinkWithoutRun() throws Exception {
        kafka.createTopics(1, in, out, dlq);

        assertThat(OnceflowCli.execute(arguments("check"))).isEqualTo(ExitCode.CLEAN);
        assertThat(tables()).as("after the check").isEmpty();

        String[] jobArguments = Arrays.copyOfRange(arguments("check"), 1, arguments("check").length);
        assertThatThrownBy(() -> OnceflowJob.execute(jobArguments, Optional.empty()))
                .isInstanceOfSatisfying(CannotRunException.class, e -> assertThat(e.problems()).singleElement()
                        .asString().startsWith("run-local: not given, and this main method was started outside Flink"));
        assertThat(tables()).as("after the refused start").isEmpty();
    }

    @Test
    void servicesThatFailAtOnceAreReportedWithTheTimeTheyReallyTook() {
        String[] args = arguments("check");
        args[Arrays.asList(args).indexOf("--kafka.bootstrap.servers") + 1] = "no-such-host.invalid:9092";
        args[Arrays.asList(args).indexOf("--postgres.url") + 1] = "jdbc:postgresql://127.0.0.1:1/onceflow";

        long started = System.nanoTime();
        Throwable thrown = catchThrowable(() -> OnceflowCli.execute(args));
        double tookSeconds = (System.nanoTime() - started) / 1e9;

        assertThat(thrown).isInstanceOf(CannotRunException.class);
        List<String> problems = ((CannotRunException) thrown).problems();
        assertThat(problems).hasSize(2);
        Matcher kafka = Pattern.compile("kafka.bootstrap.servers: no Kafka broker answered at no-such-host.invalid:9092"
                + " \\(gave up after (\\d+\\.\\d) s\\).*").matcher(problems.get(0));
        Matcher postgres = Pattern.compile("postgres.url: cannot connect to PostgreSQL at 127.0.0.1:1/onceflow"
                + " after (\\d+\\.\\d) s .*").matcher(problems.get(1));
        assertThat(kafka.matches()).as(problems.get(0)).isTrue();
        assertThat(postgres.matches()).as(problems.get(1)).isTrue();
        // the two checks run one after the other within this call: each took at most all of it
        assertThat(Double.parseDouble(kafka.group(1)) + Double.parseDouble(postgres.group(1)))
                .isLessThanOrEqualTo(tookSeconds + 0.1);
    }
}
