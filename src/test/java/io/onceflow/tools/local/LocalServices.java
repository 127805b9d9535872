package io.onceflow.tools.local;

import static java.nio.charset.StandardCharsets.UTF_8;

import io.onceflow.sink.kafka.OnceflowHeaders;
import io.onceflow.testing.TestKafka;
import io.onceflow.testing.TestPostgres;
import io.onceflow.tools.audit.CommittedTopicReader;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.Reader;
import java.io.Writer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.apache.flink.util.FileUtils;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;

/**
 * {@code bin/onceflow local-services}: a Kafka broker and a PostgreSQL on this machine, for a job
 * that {@code bin/onceflow run} runs. They are the tests' own services ({@link TestKafka}: a KRaft
 * broker in this JVM; {@link TestPostgres}: a PostgreSQL 17 server from zonky's Maven binaries), so
 * nothing needs installing and there is no Docker; like the demo, this tool lives with the tests and
 * runs on their classpath. It writes the settings that reach them to {@value #SETTINGS_FILE}, for
 * {@code run --config} after the job's own file, and stays up until Ctrl-C, which stops both and
 * deletes their data: every start is empty.
 *
 * <p>It creates only what it is told to ({@code --topic}, {@code --sql}); the job creates its own
 * tables. {@code send} and {@code read} put records on a topic and show a topic's committed records,
 * as the Kafka distribution's console tools would, which are not installed either.
 */
public final class LocalServices implements AutoCloseable {
    static final String USAGE = """
            Usage: bin/onceflow local-services [--dir DIR] [--topic NAME[:PARTITIONS]]... [--sql FILE]...
                   bin/onceflow local-services send TOPIC [--dir DIR]   < lines "ID JSON"
                   bin/onceflow local-services read TOPIC [--dir DIR]

            Starts a Kafka broker and a PostgreSQL 17 server on this machine, empty, with their data in DIR
            (default target/local-services); creates each --topic (1 partition unless PARTITIONS), runs each
            --sql file in the database postgres as its superuser, writes the settings that reach them to
            DIR/local-services.properties and prints them. Give that file to bin/onceflow run after your
            job's own: bin/onceflow run --jar JAR --config job.properties --config DIR/local-services.properties
            Runs until Ctrl-C, which stops both services and deletes DIR.

            send: each line of stdin, "ID JSON", becomes a record of TOPIC with ID as its key and its
            message-id header. read: prints TOPIC's committed records (what a read_committed consumer sees),
            one "KEY VALUE" line each, a dead letter's reason and error after them.
            """;
    static final String SETTINGS_FILE = "local-services.properties";
    /** The process that runs the services of a directory, so that a second start there is refused. */
    private static final String PID_FILE = "local-services.pid";
    private static final Path DEFAULT_DIRECTORY = Path.of("target", "local-services");
    private static final Duration READ_TIMEOUT = Duration.ofMinutes(1);

    private final Path directory;
    private final TestKafka kafka;
    private final TestPostgres postgres;

    private LocalServices(Path directory, TestKafka kafka, TestPostgres postgres) {
        this.directory = directory;
        this.kafka = kafka;
        this.postgres = postgres;
    }

    public static void main(String[] args) throws Exception {
        List<String> arguments = List.of(args);
        if (arguments.contains("--help") || arguments.contains("-h")) {
            System.out.print(USAGE);
            return;
        }
        try {
            if (!arguments.isEmpty() && (arguments.get(0).equals("send") || arguments.get(0).equals("read"))) {
                Options options = Options.parse(arguments.subList(1, arguments.size()), true);
                String bootstrapServers = bootstrapServersOf(options.directory());
                requireTopic(bootstrapServers, options.topic());
                if (arguments.get(0).equals("send")) {
                    int sent = send(bootstrapServers, options.topic(), new BufferedReader(new InputStreamReader(System.in, UTF_8)));
                    System.err.println("sent " + sent + " records to " + options.topic());
                } else {
                    read(bootstrapServers, options.topic()).forEach(System.out::println);
                }
                return;
            }
            Options options = Options.parse(arguments, false);
            LocalServices services = start(options.directory(), options.topics(), options.sqlFiles());
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                System.err.println("stopping Kafka and PostgreSQL, deleting " + services.directory);
                services.close();
            }, "local-services-shutdown"));
            System.out.println("# " + services.settingsFile() + ", for bin/onceflow run --config <your job's file> --config "
                    + services.settingsFile() + ":");
            services.settings().forEach((key, value) -> System.out.println(key + " = " + value));
            System.out.println("# up; Ctrl-C stops both and deletes " + services.directory);
            System.out.flush();
            Thread.currentThread().join(); // until Ctrl-C, whose shutdown hook stops the services
        } catch (IllegalArgumentException e) {
            System.err.println("local-services: " + e.getMessage() + " (bin/onceflow local-services --help)");
            System.exit(2);
        }
    }

    /**
     * Starts both services with their data in {@code directory} (emptied first), creates {@code
     * topics} (name to partitions), runs {@code sqlFiles} and writes {@value #SETTINGS_FILE} there.
     *
     * @throws IllegalArgumentException if {@code directory} holds anything but an earlier run's data, or
     *     services that still run
     */
    static LocalServices start(Path directory, Map<String, Integer> topics, List<Path> sqlFiles) throws IOException {
        claim(directory);
        // Kafka's storage formatter prints on stdout, which holds only the settings
        PrintStream stdout = System.out;
        System.setOut(System.err);
        TestKafka kafka;
        try {
            kafka = TestKafka.startOwn(directory.resolve("kafka"), Map.of());
        } finally {
            System.setOut(stdout);
        }
        TestPostgres postgres;
        try {
            postgres = TestPostgres.start(directory.resolve("postgres"));
        } catch (RuntimeException e) {
            kafka.close();
            throw e;
        }
        LocalServices services = new LocalServices(directory, kafka, postgres);
        try {
            topics.forEach((topic, partitions) -> kafka.createTopics(partitions, topic));
            for (Path sqlFile : sqlFiles) {
                postgres.execute(Files.readString(sqlFile));
            }
            services.writeSettings();
            return services;
        } catch (IOException | RuntimeException e) {
            services.close();
            throw e;
        }
    }

    /**
     * Empties {@code directory} for a new start: only when it is missing, empty, or holds the data of
     * an earlier start whose process has ended.
     */
    private static void claim(Path directory) throws IOException {
        Path pidFile = directory.resolve(PID_FILE);
        if (Files.isRegularFile(pidFile)) {
            Optional<ProcessHandle> running = ProcessHandle.of(Long.parseLong(Files.readString(pidFile).strip()))
                    .filter(ProcessHandle::isAlive);
            if (running.isPresent()) {
                throw new IllegalArgumentException("the services of " + directory + " run already (process "
                        + running.get().pid() + "); stop them with Ctrl-C there, or choose another --dir");
            }
            FileUtils.deleteDirectory(directory.toFile());
        } else if (Files.isDirectory(directory)) {
            try (Stream<Path> entries = Files.list(directory)) {
                if (entries.findAny().isPresent()) {
                    throw new IllegalArgumentException(directory + " is not empty and is no earlier run's"
                            + " (it has no " + PID_FILE + "): choose a --dir of its own for the services' data");
                }
            }
        }
        Files.createDirectories(directory);
        Files.writeString(pidFile, ProcessHandle.current().pid() + "\n");
    }

    /** Writes the settings file last, so that a file that exists names services that answer. */
    private void writeSettings() throws IOException {
        Path written = directory.resolve(SETTINGS_FILE + ".tmp");
        try (Writer out = Files.newBufferedWriter(written, UTF_8)) {
            out.write("# bin/onceflow local-services; give this file to bin/onceflow run after the job's own:\n");
            out.write("#   bin/onceflow run --jar JAR --config job.properties --config " + settingsFile() + "\n");
            for (Map.Entry<String, String> setting : settings().entrySet()) {
                out.write(setting.getKey() + " = " + setting.getValue() + "\n");
            }
        }
        Files.move(written, settingsFile());
    }

    /** The job settings that reach the services: the broker, and the superuser of the database postgres. */
    Map<String, String> settings() {
        Map<String, String> settings = new LinkedHashMap<>();
        settings.put("kafka.bootstrap.servers", kafka.bootstrapServers());
        settings.put("postgres.url", postgres.jdbcUrl());
        settings.put("postgres.user", postgres.user());
        // the server trusts local logins; empty overrides a password the job's own file names
        settings.put("postgres.password", "");
        return settings;
    }

    Path settingsFile() {
        return directory.resolve(SETTINGS_FILE);
    }

    /** The broker of the services that run in {@code directory}. */
    private static String bootstrapServersOf(Path directory) throws IOException {
        Path file = directory.resolve(SETTINGS_FILE);
        if (!Files.isRegularFile(file)) {
            throw new IllegalArgumentException("no " + file + ": start bin/onceflow local-services first (with --dir "
                    + directory + " if it is not the default)");
        }
        Properties settings = new Properties();
        try (Reader reader = Files.newBufferedReader(file, UTF_8)) {
            settings.load(reader);
        }
        return settings.getProperty("kafka.bootstrap.servers");
    }

    /** Refuses a topic the broker does not have: a producer would wait a minute for it, a reader find nothing. */
    private static void requireTopic(String bootstrapServers, String topic) throws Exception {
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers))) {
            Set<String> topics = admin.listTopics().names().get(30, TimeUnit.SECONDS);
            if (!topics.contains(topic)) {
                throw new IllegalArgumentException("no topic " + topic + " on " + bootstrapServers + " (it has "
                        + new TreeSet<>(topics) + "); create it with --topic when you start the services");
            }
        }
    }

    /** Sends each line {@code ID JSON} of {@code lines} to {@code topic}, ID as the key and the message-id header. */
    static int send(String bootstrapServers, String topic, BufferedReader lines) throws IOException {
        int sent = 0;
        try (KafkaProducer<byte[], byte[]> producer = TestKafka.newProducer(bootstrapServers)) {
            for (String line = lines.readLine(); line != null; line = lines.readLine()) {
                String[] idAndJson = line.strip().split("\\s+", 2);
                if (idAndJson[0].isEmpty()) {
                    continue;
                }
                if (idAndJson.length < 2) {
                    throw new IllegalArgumentException("line " + (sent + 1) + " has no JSON after its id: \"ID JSON\"");
                }
                byte[] id = idAndJson[0].getBytes(UTF_8);
                ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(topic, id, idAndJson[1].getBytes(UTF_8));
                record.headers().add(OnceflowHeaders.MESSAGE_ID, id);
                producer.send(record);
                sent++;
            }
        }
        return sent;
    }

    /** {@code topic}'s committed records, {@code KEY VALUE} each, and a dead letter's reason and error. */
    static List<String> read(String bootstrapServers, String topic) {
        List<String> lines = new ArrayList<>();
        CommittedTopicReader.forBootstrapServers(bootstrapServers).read(topic, READ_TIMEOUT, record ->
                lines.add(describe(record)));
        return lines;
    }

    private static String describe(ConsumerRecord<byte[], byte[]> record) {
        StringBuilder line = new StringBuilder()
                .append(record.key() == null ? "-" : new String(record.key(), UTF_8)).append(' ')
                .append(record.value() == null ? "-" : new String(record.value(), UTF_8));
        Header reason = record.headers().lastHeader(OnceflowHeaders.DEAD_LETTER_REASON);
        Header error = record.headers().lastHeader(OnceflowHeaders.DEAD_LETTER_ERROR);
        if (reason != null) {
            line.append("  ").append(new String(reason.value(), UTF_8));
            if (error != null) {
                line.append(": ").append(new String(error.value(), UTF_8));
            }
        }
        return line.toString();
    }

    /** Stops both services and deletes their directory. */
    @Override
    public void close() {
        try {
            kafka.close();
        } finally {
            try {
                postgres.close();
            } finally {
                FileUtils.deleteDirectoryQuietly(directory.toFile());
            }
        }
    }

    /** The command line: the directory, and for a start the topics and SQL files, or for send and read the topic. */
    private record Options(Path directory, Map<String, Integer> topics, List<Path> sqlFiles, String topic) {
        static Options parse(List<String> args, boolean oneTopic) {
            Path directory = DEFAULT_DIRECTORY;
            Map<String, Integer> topics = new LinkedHashMap<>();
            List<Path> sqlFiles = new ArrayList<>();
            String topic = null;
            for (int i = 0; i < args.size(); i++) {
                String argument = args.get(i);
                if (oneTopic && !argument.startsWith("--")) {
                    if (topic != null) {
                        throw new IllegalArgumentException("one topic, not " + topic + " and " + argument);
                    }
                    topic = argument;
                    continue;
                }
                if (i + 1 >= args.size() || !List.of("--dir", "--topic", "--sql").contains(argument)
                        || (oneTopic && !argument.equals("--dir"))) {
                    throw new IllegalArgumentException("'" + argument + "' is not an option here, or has no value");
                }
                String value = args.get(++i);
                switch (argument) {
                    case "--dir" -> directory = Path.of(value);
                    case "--topic" -> {
                        String[] nameAndPartitions = value.split(":", 2);
                        topics.put(nameAndPartitions[0],
                                nameAndPartitions.length == 2 ? Integer.parseInt(nameAndPartitions[1]) : 1);
                    }
                    default -> {
                        Path sqlFile = Path.of(value);
                        if (!Files.isReadable(sqlFile)) {
                            throw new IllegalArgumentException("--sql " + value + ": no such readable file");
                        }
                        sqlFiles.add(sqlFile);
                    }
                }
            }
            if (oneTopic && topic == null) {
                throw new IllegalArgumentException("name the topic");
            }
            return new Options(directory.toAbsolutePath().normalize(), topics, sqlFiles, topic);
        }
    }
}
