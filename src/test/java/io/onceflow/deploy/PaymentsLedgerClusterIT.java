package io.onceflow.deploy;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.onceflow.testing.Ledger;
import io.onceflow.tools.audit.PublishedOutcomes;
import io.onceflow.testing.cluster.ClusterHarness;
import io.onceflow.testing.cluster.FlinkRestClient;
import io.onceflow.testing.cluster.FlinkStandaloneCluster;
import io.onceflow.testing.cluster.ServiceClasspath;
import java.io.File;
import java.io.IOException;
import java.math.BigDecimal;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.apache.flink.configuration.CoreOptions;
import org.apache.flink.configuration.GlobalConfiguration;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;

/**
 * The example project as a team deploys it, on the multi-process harness (a Flink standalone cluster,
 * a Kafka broker and PostgreSQL, each its own process): a DBA creates the ledger and onceflow's tables
 * (printed by the job jar's {@code --print-postgres-ddl}) as their owner and runs the example's
 * {@code db/grants.sql}; the example's shaded jar, as this build's invocation of its project built it
 * (maven-invoker-plugin, before the integration tests), is submitted with Flink's CLI ({@code flink
 * run -d}) and the example's own {@code job.properties}, so its {@code main} runs as the
 * least-privilege {@code ledger_job}; Flink's classpath has no onceflow on it, so the jar must bring
 * it. A TaskManager running the job is killed mid-run and a new one started. Every message id then
 * has one inbox row and one result, each applied payment or transfer two journal lines, and each
 * balance is its opening balance moved by that account's unique messages, to the cent.
 */
class PaymentsLedgerClusterIT {
    private static final Path EXAMPLE = Path.of("examples/payments-ledger");
    /** Where the invoker builds the example (the pom's cloneProjectsTo). */
    private static final Path EXAMPLE_BUILD = Path.of("target/examples/payments-ledger/target");
    private static final Path JOB_PROPERTIES = EXAMPLE.resolve("job.properties").toAbsolutePath();
    private static final String MAIN_CLASS = "io.onceflow.examples.ledger.PaymentsLedgerJob";
    private static final int ACCOUNTS = 20;
    private static final BigDecimal OPENING = new BigDecimal("1000000.00");
    private static final int MESSAGES = 2_000;
    /** Every 40th message goes to an account that was never opened: rejected, no journal line. */
    private static final long UNKNOWN_ACCOUNT = 99;
    private static final Duration TIMEOUT = Duration.ofMinutes(4);

    private final Map<Long, BigDecimal> movedByAccount = new TreeMap<>();
    private final List<String> applied = new ArrayList<>();
    private int uniqueMessages;

    @Test
    void theShadedJarRunsAsTheJobsRoleOnAClusterAndSurvivesALostTaskManager() throws Exception {
        try (ClusterHarness cluster = ClusterHarness.start(2, 2)) {
            Map<String, String> environment = Map.of("KAFKA_BOOTSTRAP_SERVERS", cluster.kafka().bootstrapServers(),
                    "LEDGER_POSTGRES_URL", cluster.postgres().jdbcUrl());
            setUpDatabaseAsTheDba(cluster, environment);
            cluster.kafka().createTopic("payments", 2);
            cluster.kafka().createTopic("payments-accepted", 2);
            cluster.kafka().createTopic("payments-dead-letters", 1);
            cluster.kafka().createTopic("payments-outcomes", 2);
            List<ProducerRecord<String, String>> records = messages();
            produce(cluster, records.subList(0, MESSAGES / 2));

            Run submit = run(cluster, environment, "org.apache.flink.client.cli.CliFrontend",
                    ServiceClasspath.flink(), List.of("run", "-d", exampleJobJar().toAbsolutePath().toString(),
                            "--config", JOB_PROPERTIES.toString(), "--checkpoint.interval", "1s"));
            assertThat(submit.exitCode()).as("flink run: %s", submit.stderr()).isZero();

            awaitResults(cluster, uniqueMessages / 4);
            FlinkStandaloneCluster flink = cluster.flink();
            String busy = flink.rest().taskManagers().stream().filter(FlinkRestClient.TaskManagerSlots::runsTasks)
                    .findFirst().orElseThrow().id();
            flink.kill(flink.taskManagers().stream().filter(tm -> tm.resourceId().equals(busy)).findFirst().orElseThrow());
            flink.startTaskManager();
            produce(cluster, records.subList(MESSAGES / 2, records.size()));
            awaitResults(cluster, uniqueMessages);

            try (Connection ledger = cluster.postgres().connect()) {
                assertThat(rows(ledger, "SELECT count(*) FROM payments_ledger_events")).containsExactly(String.valueOf(uniqueMessages));
                assertThat(rows(ledger, "SELECT count(*) FROM payments_ledger_events WHERE deliveries <> 1"
                        + " OR result IS NULL OR result->>'status' NOT IN ('applied', 'rejected')")).containsExactly("0");
                assertThat(rows(ledger, "SELECT id FROM payments_ledger_events WHERE result->>'status' = 'applied' ORDER BY id"))
                        .containsExactlyInAnyOrderElementsOf(applied);
                Map<Long, BigDecimal> expected = new TreeMap<>();
                for (long account = 1; account <= ACCOUNTS; account++) {
                    expected.put(account, OPENING.add(movedByAccount.getOrDefault(account, BigDecimal.ZERO)));
                }
                assertThat(Ledger.balances(ledger)).isEqualTo(expected);
                Ledger.Report audit = Ledger.audit(ledger, "payments_ledger_events");
                assertThat(audit.clean()).as(audit.toString()).isTrue();
                assertThat(rows(ledger, "SELECT count(*) FILTER (WHERE lines = 2) || ' ' || count(*) FROM"
                        + " (SELECT count(*) AS lines FROM ledger.journal GROUP BY message_id) m"))
                        .as("messages with two journal lines, messages with any").containsExactly(applied.size() + " " + applied.size());
                assertThat(rows(ledger, "SELECT DISTINCT usename FROM pg_stat_activity WHERE application_name LIKE 'onceflow%'"))
                        .as("the job's sessions").isNotEmpty().containsOnly("ledger_job");
            }
            awaitPublishedOutcomes(cluster);
            try (Connection asTheJob = connectAsTheJob(cluster)) {
                assertThatThrownBy(() -> rows(asTheJob, "UPDATE ledger.accounts SET balance = 0 RETURNING id"))
                        .as("the job's role changes balances only through apply_payment")
                        .hasMessageContaining("permission denied");
            }
        }
    }

    /** The example's job jar; the invoker builds it before the integration tests run. */
    private static Path exampleJobJar() throws IOException {
        try (Stream<Path> files = Files.exists(EXAMPLE_BUILD) ? Files.list(EXAMPLE_BUILD) : Stream.empty()) {
            return files.filter(file -> file.getFileName().toString().endsWith("-job.jar")).findFirst()
                    .orElseThrow(() -> new IllegalStateException("no *-job.jar in " + EXAMPLE_BUILD.toAbsolutePath()
                            + ": mvn verify builds the example before the integration tests (not with -Dinvoker.skip)"));
        }
    }

    private static String example(String file) throws IOException {
        return Files.readString(EXAMPLE.resolve(file));
    }

    /**
     * Roles, then as the owner: the ledger, onceflow's tables as the job jar prints them, accounts, and
     * db/grants.sql as it is. The job's role has no password here: the test server trusts local logins.
     */
    private static void setUpDatabaseAsTheDba(ClusterHarness cluster, Map<String, String> environment) throws Exception {
        Run ddl = run(cluster, environment, MAIN_CLASS, exampleJobJar().toAbsolutePath() + File.pathSeparator
                + ServiceClasspath.flink(), List.of("--print-postgres-ddl", "--config", JOB_PROPERTIES.toString()));
        assertThat(ddl.exitCode()).as("--print-postgres-ddl: %s", ddl.stderr()).isZero();
        cluster.postgres().execute("CREATE ROLE ledger_owner NOLOGIN", "CREATE ROLE ledger_job LOGIN",
                "GRANT CREATE ON DATABASE postgres TO ledger_owner", "GRANT CREATE ON SCHEMA public TO ledger_owner",
                "SET ROLE ledger_owner; " + example("src/main/resources/db/ledger.sql") + "; " + ddl.stdout()
                        + "; INSERT INTO ledger.accounts (id, opening_balance, balance) SELECT id, " + OPENING + ", "
                        + OPENING + " FROM generate_series(1, " + ACCOUNTS + ") id; "
                        + example("src/main/resources/db/grants.sql") + "; RESET ROLE");
    }

    /**
     * Payments and transfers between open accounts, some to an unknown one, one with half a kopeck, and
     * every 25th a redelivery of an earlier message. Every account opens with plenty, so no outcome
     * depends on the order they meet.
     */
    private List<ProducerRecord<String, String>> messages() {
        Random random = new Random(23);
        List<ProducerRecord<String, String>> records = new ArrayList<>();
        for (int i = 0; records.size() < MESSAGES; i++) {
            if (i % 25 == 24) {
                records.add(records.get(random.nextInt(records.size())));
                continue;
            }
            String id = "msg-" + i;
            uniqueMessages++;
            long from = i % 40 == 0 ? UNKNOWN_ACCOUNT : 1 + random.nextInt(ACCOUNTS);
            String amount = i == 7 ? "10.005" : BigDecimal.valueOf(1 + random.nextInt(100_000), 2).toPlainString();
            String json;
            if (i % 3 == 0) {
                long to = 1 + (from + random.nextInt(ACCOUNTS - 1)) % ACCOUNTS;
                json = "{\"type\":\"transfer\",\"transfer_from\":" + from + ",\"transfer_to\":" + to
                        + ",\"amount\":\"" + amount + "\",\"currency\":\"RUB\"}";
                move(id, from, to, amount);
            } else {
                json = "{\"type\":\"payment\",\"user_id\":" + from + ",\"amount\":" + amount + ",\"currency\":\"RUB\"}";
                move(id, from, 0, amount);
            }
            ProducerRecord<String, String> record = new ProducerRecord<>("payments", id, json);
            record.headers().add("message-id", id.getBytes(UTF_8));
            records.add(record);
        }
        return records;
    }

    /** Notes what an applied message moves; {@code to} 0 is the outside world (a payment). */
    private void move(String id, long from, long to, String amount) {
        if (from == UNKNOWN_ACCOUNT || amount.equals("10.005")) {
            return;
        }
        applied.add(id);
        movedByAccount.merge(from, new BigDecimal(amount).negate(), BigDecimal::add);
        if (to != 0) {
            movedByAccount.merge(to, new BigDecimal(amount), BigDecimal::add);
        }
    }

    private static void produce(ClusterHarness cluster, List<ProducerRecord<String, String>> records) {
        Properties properties = new Properties();
        properties.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.kafka().bootstrapServers());
        try (KafkaProducer<String, String> producer =
                new KafkaProducer<>(properties, new StringSerializer(), new StringSerializer())) {
            records.forEach(producer::send);
        }
    }

    /** Waits until {@code count} message ids have an effect result (applied or rejected). */
    /**
     * The results topic, once the relays caught up: every decided payment's outcome once, with its
     * status, in each input partition's order, across the lost TaskManager.
     */
    private static void awaitPublishedOutcomes(ClusterHarness cluster) throws Exception {
        Map<String, String> decided = new TreeMap<>();
        try (Connection ledger = cluster.postgres().connect()) {
            for (String row : rows(ledger, "SELECT id || ' ' || (result->>'status') FROM payments_ledger_events")) {
                decided.put(row.substring(0, row.indexOf(' ')), row.substring(row.indexOf(' ') + 1));
            }
        }
        long deadline = System.nanoTime() + TIMEOUT.toNanos();
        List<String> problems;
        do {
            PublishedOutcomes published = PublishedOutcomes.read(cluster.kafka().bootstrapServers(),
                    "payments-outcomes", Duration.ofSeconds(10));
            problems = published.problems(decided);
            if (problems.isEmpty()) {
                return;
            }
            Thread.sleep(500);
        } while (System.nanoTime() < deadline);
        throw new AssertionError("the results topic within " + TIMEOUT + ": " + problems);
    }

    private static void awaitResults(ClusterHarness cluster, int count) throws Exception {
        long deadline = System.nanoTime() + TIMEOUT.toNanos();
        long results = 0;
        while (System.nanoTime() < deadline) {
            try (Connection connection = cluster.postgres().connect()) {
                results = Long.parseLong(rows(connection, "SELECT count(*) FROM payments_ledger_events WHERE result IS NOT NULL").get(0));
            }
            if (results >= count) {
                return;
            }
            Thread.sleep(500);
        }
        throw new AssertionError(results + " of " + count + " results within " + TIMEOUT + "; the JobManager's log ends:\n"
                + FlinkStandaloneCluster.tail(cluster.flink().jobManagerLog(), 40));
    }

    private static Connection connectAsTheJob(ClusterHarness cluster) throws SQLException {
        return DriverManager.getConnection(cluster.postgres().jdbcUrl(), "ledger_job", "");
    }

    private static List<String> rows(Connection connection, String query) throws SQLException {
        List<String> rows = new ArrayList<>();
        try (Statement statement = connection.createStatement(); ResultSet result = statement.executeQuery(query)) {
            while (result.next()) {
                rows.add(result.getString(1));
            }
        }
        return rows;
    }

    private record Run(int exitCode, String stdout, String stderr) {}

    /**
     * Runs {@code mainClass} in a JVM of its own, as Flink's scripts run the CLI: the cluster's
     * configuration directory and JVM options, its CLI logging, and {@code environment} for the
     * job's {@code ${...}} settings.
     */
    private static Run run(ClusterHarness cluster, Map<String, String> environment, String mainClass, String classpath,
            List<String> args) throws Exception {
        Path conf = cluster.flink().configurationDirectory();
        Path stdout = Files.createTempFile(cluster.directory(), "stdout", ".txt");
        Path stderr = Files.createTempFile(cluster.directory(), "stderr", ".txt");
        List<String> command = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString()));
        command.addAll(List.of(GlobalConfiguration.loadConfiguration(conf.toString())
                .get(CoreOptions.FLINK_JVM_OPTIONS).trim().split("\\s+")));
        command.addAll(List.of("-Dlog.file=" + cluster.directory().resolve("client.log"),
                "-Dlog4j.configurationFile=" + conf.resolve("log4j-cli.properties").toUri(), "-cp", classpath, mainClass));
        command.addAll(args);
        ProcessBuilder builder = new ProcessBuilder(command).redirectOutput(stdout.toFile()).redirectError(stderr.toFile());
        builder.environment().putAll(environment);
        builder.environment().put("FLINK_CONF_DIR", conf.toString());
        Process process = builder.start();
        if (!process.waitFor(2, TimeUnit.MINUTES)) {
            process.destroyForcibly();
            throw new AssertionError(mainClass + " did not end within 2 minutes");
        }
        Run run = new Run(process.exitValue(), Files.readString(stdout), Files.readString(stderr));
        System.out.printf("%s: exit %d%n  stderr: %s%n", mainClass, run.exitCode(), run.stderr().strip());
        return run;
    }
}
