package io.onceflow.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.testing.TestKafka;
import io.onceflow.testing.TestPostgres;
import io.onceflow.testing.cluster.ClusterHarness;
import io.onceflow.testing.cluster.ServiceClasspath;
import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every entry point run as a user runs it, each in its own JVM from the job jar: the job through
 * Flink's CLI ({@code flink run}, with the project's client logging), {@code --help}, {@code
 * --print-postgres-ddl} and the audit with {@code java -cp job.jar:flink-libs} (the job itself only
 * with {@code --run-local} there). Against a real broker
 * and a real PostgreSQL, and against addresses where nothing listens. A distinct secret is planted in
 * every place a secret can be given; none may appear in any output or log. Failures are one line per
 * problem, never a stack trace, and end with exit status 2.
 */
class EntryPointsIT {
    private static final String JOB = "io.onceflow.job.OnceflowJob";
    private static final String AUDIT = "io.onceflow.tools.audit.AuditCommand";
    private static final String CLI = "org.apache.flink.client.cli.CliFrontend";

    private static final String ARGUMENT_EQUALS_SECRET = "argEquals-Secret-1";
    private static final String ARGUMENT_SPACE_SECRET = "argSpace-Secret-2";
    private static final String FILE_SECRET = "configFile-Secret-3";
    private static final String ENVIRONMENT_SECRET = "environment-Secret-4";
    private static final String JAAS_SECRET = "jaas-Secret-5";
    private static final String URL_SECRET = "url-Secret-6";
    private static final List<String> SECRETS = List.of(ARGUMENT_EQUALS_SECRET, ARGUMENT_SPACE_SECRET, FILE_SECRET,
            ENVIRONMENT_SECRET, JAAS_SECRET, URL_SECRET);
    private static final Map<String, String> ENVIRONMENT = Map.of(
            "PG_PASSWORD", ENVIRONMENT_SECRET,
            "KAFKA_JAAS", "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"svc\""
                    + " password=\"" + JAAS_SECRET + "\";");
    /** A problem line: {@code <key>: <what is wrong>. <what to do>}. */
    private static final Pattern PROBLEM_LINE = Pattern.compile("[a-z][a-z.-]*[a-z]: .+");

    private static String jobJarAndFlink;
    @TempDir static Path directory;

    @BeforeAll
    static void classpath() throws IOException {
        jobJarAndFlink = ClusterHarness.jobJar().toAbsolutePath() + File.pathSeparator + ServiceClasspath.flink();
    }

    private record Run(int exitCode, String stdout, String stderr, String log, Duration took) {
        void revealsNoSecret() {
            for (String secret : SECRETS) {
                assertThat(stdout + stderr + log).as("output and log").doesNotContain(secret);
            }
        }

        void failsWithOneLinePerProblem() {
            assertThat(exitCode).as("exit status; stderr: " + stderr).isEqualTo(2);
            assertThat(stderr.lines().filter(line -> !line.isBlank()).toList()).isNotEmpty()
                    .allMatch(line -> PROBLEM_LINE.matcher(line).matches(), "is a one-line problem");
            assertThat(stdout + stderr).doesNotContain("Exception", "\tat ");
        }
    }

    /** Secrets in both argument forms, a config file, an environment variable and a JAAS config. */
    private static List<String> secretBearingArguments(String bootstrapServers, String postgresUrl) throws IOException {
        Path configFile = directory.resolve("job-" + System.nanoTime() + ".properties");
        Files.writeString(configFile, "kafka.properties.ssl.keystore.password = " + FILE_SECRET + "\n"
                + "kafka.properties.sasl.jaas.config = ${KAFKA_JAAS}\n");
        return new ArrayList<>(List.of("--config", configFile.toString(),
                "--kafka.bootstrap.servers", bootstrapServers, "--input.topics", "entry-in",
                "--input.group.id", "entry", "--output.topic", "entry-out", "--dead.letter.topic", "entry-dlq",
                "--kafka.transactional.id.prefix", "entry",
                "--kafka.properties.ssl.truststore.password", ARGUMENT_SPACE_SECRET,
                "--postgres.url", postgresUrl, "--postgres.user", "postgres", "--postgres.sink.prefix", "entry",
                "--postgres.password=" + ARGUMENT_EQUALS_SECRET));
    }

    private static String nobodyListens() {
        return "127.0.0.1:" + ServiceClasspath.freePort();
    }

    @Test
    void anUnreachableBrokerFailsFastThroughFlinksCliWithOneLine() throws Exception {
        List<String> args = new ArrayList<>(List.of("run", ClusterHarness.jobJar().toAbsolutePath().toString()));
        args.addAll(secretBearingArguments(nobodyListens(), "jdbc:postgresql://" + nobodyListens() + "/onceflow"));
        args.set(args.indexOf("--postgres.password=" + ARGUMENT_EQUALS_SECRET), "--postgres.password");
        args.add(args.indexOf("--postgres.password") + 1, ARGUMENT_EQUALS_SECRET);

        Run run = runFlinkCli(args);

        run.failsWithOneLinePerProblem();
        run.revealsNoSecret();
        assertThat(run.took()).isLessThan(Duration.ofSeconds(30));
        assertThat(run.stderr()).contains("kafka.bootstrap.servers: no Kafka broker answered at 127.0.0.1:",
                "postgres.url: cannot connect to PostgreSQL at 127.0.0.1:");
        assertThat(run.log()).as("the client log").contains("Program Arguments").doesNotContain("Rebootstrapping");
    }

    @Test
    void missingTopicsAndAMissingDatabaseAreNamedWithTheirFix() throws Exception {
        TestPostgres.TestDatabase database = TestPostgres.shared().newDatabase();
        List<String> args = secretBearingArguments(TestKafka.shared().bootstrapServers(),
                database.jdbcUrl().replaceFirst("/[^/?]+(\\?.*)?$", "/no_such_database"));
        args.set(args.indexOf("--postgres.password=" + ARGUMENT_EQUALS_SECRET), "--postgres.password=${PG_PASSWORD}");

        Run run = runJava(JOB, args);

        run.failsWithOneLinePerProblem();
        run.revealsNoSecret();
        assertThat(run.stderr()).contains("input.topics: the topic 'entry-in' does not exist on",
                "output.topic: the topic 'entry-out' does not exist", "dead.letter.topic: the topic 'entry-dlq'",
                "kafka-topics.sh --bootstrap-server", "postgres.url: PostgreSQL at", "no_such_database");
    }

    @Test
    void theDatabasesPreconditionFailureIsOneLine() throws Exception {
        TestKafka kafka = TestKafka.shared();
        String in = TestKafka.uniqueTopic("entry-in");
        String out = TestKafka.uniqueTopic("entry-out");
        String dlq = TestKafka.uniqueTopic("entry-dlq");
        kafka.createTopics(1, in, out, dlq);
        List<String> args = secretBearingArguments(kafka.bootstrapServers(), TestPostgres.shared().newDatabase().jdbcUrl());
        args.set(args.indexOf("entry-in"), in);
        args.set(args.indexOf("entry-out"), out);
        args.set(args.indexOf("entry-dlq"), dlq);
        // more prepared transactions than the server allows (TestPostgres.MAX_PREPARED_TRANSACTIONS)
        args.addAll(List.of("--parallelism", "40"));
        List<String> runLocal = new ArrayList<>(args);
        runLocal.add("--run-local");

        Run refused = runJava(JOB, args);
        Run run = runJava(JOB, runLocal);

        refused.failsWithOneLinePerProblem();
        assertThat(refused.stderr()).as("outside Flink without --run-local, before the tables are checked")
                .startsWith("run-local: not given, and this main method was started outside Flink");
        run.failsWithOneLinePerProblem();
        run.revealsNoSecret();
        assertThat(run.stderr()).startsWith("postgres.url: PostgreSQL at ").contains("max_prepared_transactions");
    }

    @Test
    void helpIsPrintedWhereverItIsAndRevealsNothing() throws Exception {
        List<String> args = secretBearingArguments(nobodyListens(), "jdbc:postgresql://bob:" + URL_SECRET + "@db/x");
        args.add(3, "--help");

        for (String command : List.of(JOB, AUDIT)) {
            Run run = runJava(command, args);

            assertThat(run.exitCode()).isZero();
            assertThat(run.stdout()).startsWith("Usage: ").contains("kafka.bootstrap.servers (required)", "Exit status");
            run.revealsNoSecret();
        }
        assertThat(runJava(AUDIT, List.of("-h")).stdout()).contains("--read-timeout DURATION");
        assertThat(runJava(JOB, List.of("-h")).stdout()).contains("--print-postgres-ddl");
    }

    @Test
    void theDdlNeedsOnlyThePostgresSettings() throws Exception {
        Run ddl = runJava(JOB, List.of("--print-postgres-ddl", "--postgres.url=jdbc:postgresql://db/x",
                "--postgres.user", "onceflow", "--postgres.password", ARGUMENT_SPACE_SECRET,
                "--postgres.table", "ledger.events"));
        Run withoutUrl = runJava(JOB, List.of("--print-postgres-ddl", "--postgres.password=" + ARGUMENT_EQUALS_SECRET));

        assertThat(ddl.exitCode()).as(ddl.stderr()).isZero();
        assertThat(ddl.stdout()).contains("CREATE TABLE IF NOT EXISTS ledger.events", "onceflow_commit_log");
        ddl.revealsNoSecret();
        assertThat(withoutUrl.exitCode()).isEqualTo(2);
        assertThat(withoutUrl.stderr()).contains("postgres.url: is required here but not set.")
                .doesNotContain("Exception");
        withoutUrl.revealsNoSecret();
    }

    @Test
    void configurationProblemsNeverEchoASecret() throws Exception {
        List<String> args = secretBearingArguments(nobodyListens(), "jdbc:postgresql://bob:" + URL_SECRET + "@db/x");
        args.addAll(List.of("--postgres.passwrd=" + ARGUMENT_EQUALS_SECRET, "--" + "=" + ARGUMENT_SPACE_SECRET));

        for (String command : List.of(JOB, AUDIT)) {
            Run run = runJava(command, args);

            assertThat(run.exitCode()).isEqualTo(2);
            assertThat(run.stderr()).contains("postgres.url: contains user information",
                    "postgres.passwrd: unknown key", "is not a --key").doesNotContain("Exception");
            run.revealsNoSecret();
        }
    }

    @Test
    void theJobChecksItsProcessorClassWithTheOtherSettingsAndTheAuditNeedNotHaveIt() throws Exception {
        List<String> args = secretBearingArguments(nobodyListens(), "jdbc:postgresql://bob:" + URL_SECRET + "@db/x");
        args.addAll(List.of("--processor.class", "com.example.NoSuchProcessor"));

        Run job = runJava(JOB, args);
        Run audit = runJava(AUDIT, args);

        assertThat(job.exitCode()).isEqualTo(2);
        assertThat(job.stderr()).contains("(2 problems)", "postgres.url: contains user information",
                "processor.class: class 'com.example.NoSuchProcessor' is not on the job's classpath.")
                .doesNotContain("Exception");
        assertThat(audit.exitCode()).isEqualTo(2);
        assertThat(audit.stderr()).contains("(1 problem)", "postgres.url: contains user information");
        job.revealsNoSecret();
        audit.revealsNoSecret();
    }

    @Test
    void anOwnMainMethodRunsTheJobAsItsMainDoes() throws Exception {
        List<String> args = secretBearingArguments(nobodyListens(), "jdbc:postgresql://" + nobodyListens() + "/x");
        args.addAll(List.of("--processor.class", "io.onceflow.api.EventProcessor$PassThrough"));
        String withTheTeamsClasses = jobJarAndFlink + File.pathSeparator + Path.of("target", "test-classes").toAbsolutePath();

        Run run = run(OwnJobMain.class.getName(), withTheTeamsClasses, args, Map.of());

        assertThat(run.exitCode()).as("the exit status main would end with").isEqualTo(2);
        assertThat(run.stderr()).contains("processor.class: is set, but the job was started with a processor of its own")
                .doesNotContain("Exception");
        run.revealsNoSecret();
    }

    @Test
    void theAuditFailsFastWithOneLineAndTakesTheJobsDurations() throws Exception {
        List<String> args = secretBearingArguments(nobodyListens(), "jdbc:postgresql://" + nobodyListens() + "/x");
        args.addAll(List.of("--read-timeout", "10min", "--format=json"));

        Run run = runJava(AUDIT, args);

        run.failsWithOneLinePerProblem();
        run.revealsNoSecret();
        assertThat(run.took()).isLessThan(Duration.ofSeconds(30));
        assertThat(run.stderr()).contains("kafka.bootstrap.servers: no Kafka broker answered");
    }

    private static Run runJava(String mainClass, List<String> args) throws Exception {
        return run(mainClass, jobJarAndFlink, args, Map.of());
    }

    private static Run runFlinkCli(List<String> args) throws Exception {
        return run(CLI, ServiceClasspath.flink(), args, Map.of("FLINK_CONF_DIR", Path.of("flink-conf").toAbsolutePath().toString()));
    }

    /** Runs a JVM as Flink's scripts would, with flink-conf/log4j-cli.properties writing to a log file. */
    private static Run run(String mainClass, String classpath, List<String> args, Map<String, String> extraEnvironment)
            throws Exception {
        Path log = directory.resolve("client-" + System.nanoTime() + ".log");
        Path stdout = directory.resolve("stdout-" + System.nanoTime());
        Path stderr = directory.resolve("stderr-" + System.nanoTime());
        List<String> command = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Xmx512m", "-Dlog.file=" + log,
                "-Dlog4j.configurationFile=" + Path.of("flink-conf", "log4j-cli.properties").toUri(),
                "--add-opens=java.base/java.util=ALL-UNNAMED", "--add-opens=java.base/java.lang=ALL-UNNAMED",
                "-cp", classpath, mainClass));
        command.addAll(args);
        ProcessBuilder builder = new ProcessBuilder(command).redirectOutput(stdout.toFile()).redirectError(stderr.toFile());
        builder.environment().putAll(ENVIRONMENT);
        builder.environment().putAll(extraEnvironment);
        long started = System.nanoTime();
        Process process = builder.start();
        if (!process.waitFor(2, TimeUnit.MINUTES)) {
            process.destroyForcibly();
            throw new AssertionError(mainClass + " did not end within 2 minutes");
        }
        Duration took = Duration.ofNanos(System.nanoTime() - started);
        String logText = Files.exists(log) ? Files.readString(log) : "";
        Run run = new Run(process.exitValue(), Files.readString(stdout), Files.readString(stderr), logText, took);
        // not the arguments: they hold the planted secrets
        System.out.printf("%s: exit %d after %d ms%n  stderr: %s%n", mainClass, run.exitCode(), took.toMillis(),
                run.stderr().strip());
        return run;
    }
}
