package io.onceflow.testing.cluster;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.onceflow.testing.TestPostgres;
import java.io.File;
import java.io.IOException;
import java.io.Writer;
import java.net.URI;
import java.nio.file.FileSystem;
import java.nio.file.FileSystems;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.stream.Stream;
import org.apache.commons.io.FileUtils;

/**
 * Everything a real deployment of onceflow runs on, each service its own process: a Flink standalone
 * cluster (one JobManager, TaskManagers), a Kafka broker (KRaft) and PostgreSQL, all on loopback and
 * free ports, all under one temporary directory. {@link #close()} kills every process and deletes the
 * directory; a shutdown hook does the same if the test JVM exits without closing the harness.
 *
 * <p>Needs the shaded job jar ({@code mvn package}); failsafe runs after the package phase.
 */
public final class ClusterHarness implements AutoCloseable {
    /** Where {@code mvn package} puts the job jar, relative to the project directory (failsafe's working directory). */
    private static final Path TARGET = Path.of("target");
    /** The project's Flink configuration, relative to the project directory. */
    private static final Path FLINK_CONF = Path.of("flink-conf");

    private final Path directory;
    private final Thread cleanupOnExit = new Thread(this::cleanUp, "cluster-harness-cleanup");
    private final List<AutoCloseable> services = new ArrayList<>();
    private KafkaBrokerProcess kafka;
    private TestPostgres postgres;
    private FlinkStandaloneCluster flink;

    private ClusterHarness(Path directory) {
        this.directory = directory;
    }

    /** Starts Kafka, PostgreSQL and a Flink cluster of one JobManager and {@code taskManagers} TaskManagers. */
    public static ClusterHarness start(int taskManagers, int slotsPerTaskManager) throws IOException {
        return start(taskManagers, slotsPerTaskManager, Map.of());
    }

    /** As {@link #start(int, int)}, with {@code settings} added to the Flink configuration. */
    public static ClusterHarness start(int taskManagers, int slotsPerTaskManager, Map<String, String> settings)
            throws IOException {
        ClusterHarness harness = startServices();
        try {
            harness.flink = harness.register(FlinkStandaloneCluster.start(harness.directory.resolve("flink"),
                    FLINK_CONF, settings, taskManagers, slotsPerTaskManager));
            return harness;
        } catch (RuntimeException | Error e) {
            harness.close();
            throw e;
        }
    }

    /**
     * Starts Kafka and PostgreSQL only, for a test that starts its Flink cluster in application mode
     * ({@link #startApplicationCluster}) once the job's topics and settings are ready.
     */
    public static ClusterHarness startServices() throws IOException {
        ClusterHarness harness = new ClusterHarness(Files.createTempDirectory("onceflow-cluster"));
        Runtime.getRuntime().addShutdownHook(harness.cleanupOnExit);
        try {
            harness.kafka = harness.register(KafkaBrokerProcess.start(harness.directory.resolve("kafka"),
                    FLINK_CONF.resolve("log4j.properties")));
            harness.postgres = harness.register(TestPostgres.start(harness.directory.resolve("postgres")));
            return harness;
        } catch (RuntimeException | Error e) {
            harness.close();
            throw e;
        }
    }

    /** Starts the Flink cluster of {@link #startServices} in application mode; see {@link FlinkStandaloneCluster#startApplication}. */
    public FlinkStandaloneCluster startApplicationCluster(Map<String, String> settings,
            FlinkStandaloneCluster.Application application, int taskManagers, int slotsPerTaskManager) {
        if (flink != null) {
            throw new IllegalStateException("the Flink cluster runs already");
        }
        flink = register(FlinkStandaloneCluster.startApplication(directory.resolve("flink"), FLINK_CONF,
                settings, application, taskManagers, slotsPerTaskManager));
        return flink;
    }

    private <T extends AutoCloseable> T register(T service) {
        services.add(service);
        return service;
    }

    public KafkaBrokerProcess kafka() {
        return kafka;
    }

    public TestPostgres postgres() {
        return postgres;
    }

    public FlinkStandaloneCluster flink() {
        return flink;
    }

    /**
     * The settings a cluster test's job starts from, all named after {@code name}: the topics
     * {@code name-in} and {@code name-out} with {@code partitions} partitions and {@code name-dlq} with
     * one (created here), the consumer group, the Kafka transactional id prefix and the PostgreSQL sink
     * prefix, on the harness's broker and database. Sorted and mutable: add what the test needs.
     */
    public Map<String, String> jobSettings(String name, int partitions) {
        return jobSettings(name, partitions, 1);
    }

    /** As {@link #jobSettings(String, int)}, with {@code deadLetterPartitions} partitions of {@code name-dlq}. */
    public Map<String, String> jobSettings(String name, int partitions, int deadLetterPartitions) {
        Map<String, String> settings = kafkaJobSettings(name, partitions, deadLetterPartitions);
        settings.put("postgres.url", postgres.jdbcUrl());
        settings.put("postgres.user", postgres.user());
        settings.put("postgres.sink.prefix", name);
        return settings;
    }

    /**
     * As {@link #jobSettings(String, int, int)} without the PostgreSQL sink: the topics (created here),
     * the consumer group and the Kafka transactional id prefix, on the harness's broker.
     */
    public Map<String, String> kafkaJobSettings(String name, int partitions, int deadLetterPartitions) {
        kafka.createTopic(name + "-in", partitions);
        kafka.createTopic(name + "-out", partitions);
        kafka.createTopic(name + "-dlq", deadLetterPartitions);
        Map<String, String> settings = new TreeMap<>();
        settings.put("kafka.bootstrap.servers", kafka.bootstrapServers());
        settings.put("input.topics", name + "-in");
        settings.put("input.group.id", name);
        settings.put("output.topic", name + "-out");
        settings.put("dead.letter.topic", name + "-dlq");
        settings.put("kafka.transactional.id.prefix", name);
        return settings;
    }

    /** {@code settings} as command-line arguments, {@code --key value} each, in the map's order. */
    public static List<String> asArguments(Map<String, String> settings) {
        List<String> arguments = new ArrayList<>();
        settings.forEach((key, value) -> arguments.addAll(List.of("--" + key, value)));
        return arguments;
    }

    /** Writes {@code settings} to {@code name-job.properties} in the harness's directory, for {@code --config}. */
    public Path writeJobProperties(String name, Map<String, String> settings) throws IOException {
        Properties properties = new Properties();
        properties.putAll(settings);
        Path file = directory.resolve(name + "-job.properties");
        try (Writer out = Files.newBufferedWriter(file)) {
            properties.store(out, name);
        }
        return file;
    }

    /** The harness's own scratch directory (deleted on close). */
    public Path directory() {
        return directory;
    }

    /** The shaded job jar that {@code mvn package} built. */
    public static Path jobJar() throws IOException {
        try (Stream<Path> jars = Files.list(TARGET)) {
            return jars.filter(jar -> jar.getFileName().toString().endsWith("-job.jar")).findFirst()
                    .orElseThrow(() -> new IllegalStateException("no *-job.jar in " + TARGET.toAbsolutePath()
                            + ": run the integration tests with mvn verify (after package)"));
        }
    }

    /**
     * A copy of the job jar (in the harness's directory) with {@code testClasses} and their nested
     * classes added from the test classes' directory: a test processor or failure switch that the
     * job's {@code processor.class} can name, as a team packs its own processor into its job jar.
     */
    public Path jobJarWith(Class<?>... testClasses) throws IOException {
        Path jar = Files.copy(jobJar(), directory.resolve("job-with-test-classes.jar"));
        try (FileSystem zip = FileSystems.newFileSystem(jar)) {
            for (Class<?> testClass : testClasses) {
                Path classes = Path.of(URI.create(
                        testClass.getProtectionDomain().getCodeSource().getLocation().toString()));
                Path packageDir = classes.resolve(testClass.getPackageName().replace('.', '/'));
                try (Stream<Path> files = Files.list(packageDir)) {
                    for (Path file : files.filter(f -> isClassFileOf(f, testClass)).toList()) {
                        Path target = zip.getPath(classes.relativize(file).toString());
                        Files.createDirectories(target.getParent());
                        Files.copy(file, target, StandardCopyOption.REPLACE_EXISTING);
                    }
                }
            }
        }
        return jar;
    }

    private static boolean isClassFileOf(Path file, Class<?> testClass) {
        String name = file.getFileName().toString();
        return name.equals(testClass.getSimpleName() + ".class") || name.startsWith(testClass.getSimpleName() + "$");
    }

    /**
     * Runs {@code io.onceflow.tools.audit.AuditCommand --format json} from the job jar as its own JVM,
     * with the job's arguments, as an operator would ({@code java -cp job.jar:flink-libs ...}), and
     * parses its report.
     */
    public AuditOutcome audit(List<String> jobArgs, Duration timeout) throws IOException {
        Path log = directory.resolve("audit-" + System.nanoTime() + ".json");
        List<String> args = new ArrayList<>(jobArgs);
        args.addAll(List.of("--format", "json", "--read-timeout", "120s"));
        // the audit keeps every id of its scope in memory: the long chaos run's 2.5 million ids
        // ran out of a 1 GB heap (2026-12-07)
        int exit = JvmProcess.run("audit", List.of("-Xmx3g"),
                jobJar().toAbsolutePath() + File.pathSeparator + ServiceClasspath.flink(),
                "io.onceflow.tools.audit.AuditCommand", args, log, timeout);
        String output = Files.readString(log);
        int jsonStart = output.indexOf("{\n");
        if (jsonStart < 0) {
            throw new IllegalStateException("the audit printed no JSON report (exit " + exit + "): " + output);
        }
        return new AuditOutcome(exit, new ObjectMapper().readTree(output.substring(jsonStart)));
    }

    /** The audit command's exit code (0 clean, 1 findings, 2 configuration error) and its JSON report. */
    public record AuditOutcome(int exitCode, JsonNode report) {
        /**
         * Asserts a clean audit of a job that read what {@code truth} describes plus {@code extraIds}
         * records with new ids of the test's own: every input id once in the output topic and in
         * PostgreSQL, delivered once, and the poison records (only) dead-lettered.
         */
        public void assertEveryIdOnce(ContinuousProducer.GroundTruth truth, long extraIds) {
            assertThat(report.path("problems")).as("audit problems").isEmpty();
            assertThat(exitCode).as("audit exit code").isZero();
            assertThat(report.path("input").path("records").asLong()).as("input records")
                    .isEqualTo(truth.records() + extraIds);
            assertThat(report.path("output").path("records").asLong()).as("output records")
                    .isEqualTo(truth.uniqueIds() + extraIds);
            assertThat(report.path("postgres").path("rows").asLong()).as("PostgreSQL rows")
                    .isEqualTo(truth.uniqueIds() + extraIds);
            assertThat(report.path("postgres").path("maxDeliveries").asLong()).as("max deliveries").isEqualTo(1);
            assertThat(report.path("deadLetters").path("records").asLong()).as("dead letters")
                    .isEqualTo(truth.poisonRecords());
        }
    }

    @Override
    public void close() {
        cleanUp();
        try {
            Runtime.getRuntime().removeShutdownHook(cleanupOnExit);
        } catch (IllegalStateException shuttingDown) {
            // the hook is running or has run: nothing left to do
        }
    }

    /** Stops the services in reverse start order, then deletes every file they left. */
    private synchronized void cleanUp() {
        for (int i = services.size() - 1; i >= 0; i--) {
            try {
                services.get(i).close();
            } catch (Exception e) {
                System.err.println("could not stop " + services.get(i) + ": " + e);
            }
        }
        services.clear();
        FileUtils.deleteQuietly(directory.toFile());
    }
}
