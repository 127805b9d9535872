package io.onceflow.testing.cluster;

import io.onceflow.testing.Eventually;
import io.onceflow.testing.TestCertificates;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;

/**
 * One Kafka 4.2 broker in KRaft mode (broker and controller in one process) as its own JVM, so that
 * it can be killed with {@code kill -9} and restarted on the same ports and log directory. Replication
 * factor 1 for the internal topics, and fast controller heartbeats so that a restart after a kill takes
 * seconds rather than the default session timeout.
 *
 * <p>{@link #startSecured} adds what a production cluster has: a {@code SASL_SSL} listener (TLS with
 * the given certificate, SCRAM-SHA-512 logins) and Kafka's standard authorizer, which allows nothing
 * that no ACL grants. The plaintext listener stays, for the broker's own traffic and the test's
 * administration: its anonymous principal is the super user, as a cluster operator's would be.
 */
public final class KafkaBrokerProcess implements AutoCloseable {
    private static final String MAIN_CLASS = "kafka.Kafka";
    private static final Duration READY_TIMEOUT = Duration.ofSeconds(60);

    private final Path directory;
    private final Path log4jConfig;
    private final int brokerPort = ServiceClasspath.freePort();
    private final int controllerPort = ServiceClasspath.freePort();
    /** The TLS listener's certificate; empty for a broker with only the plaintext listener. */
    private final Optional<TestCertificates.ServerCertificate> certificate;
    private final int saslSslPort = ServiceClasspath.freePort();
    private JvmProcess process;

    private KafkaBrokerProcess(Path directory, Path log4jConfig,
            Optional<TestCertificates.ServerCertificate> certificate) {
        this.directory = directory;
        this.log4jConfig = log4jConfig;
        this.certificate = certificate;
    }

    /** Formats a fresh log directory under {@code directory} and starts the broker. */
    public static KafkaBrokerProcess start(Path directory, Path log4jConfig) {
        return start(new KafkaBrokerProcess(directory, log4jConfig, Optional.empty()));
    }

    /**
     * As {@link #start}, with a {@code SASL_SSL} listener at {@link #saslSslBootstrapServers()} and the
     * standard authorizer; users are added with {@link #addScramUser}, ACLs through {@link #admin()}.
     *
     * @param certificate the listener's certificate (its key store is used)
     */
    public static KafkaBrokerProcess startSecured(Path directory, Path log4jConfig,
            TestCertificates.ServerCertificate certificate) {
        return start(new KafkaBrokerProcess(directory, log4jConfig, Optional.of(certificate)));
    }

    private static KafkaBrokerProcess start(KafkaBrokerProcess broker) {
        broker.format();
        broker.startProcess();
        return broker;
    }

    /** The plaintext listener: on a secured broker, the super user's. */
    public String bootstrapServers() {
        return "127.0.0.1:" + brokerPort;
    }

    /** The {@code SASL_SSL} listener of a broker started with {@link #startSecured}. */
    public String saslSslBootstrapServers() {
        return "127.0.0.1:" + saslSslPort;
    }

    /** Adds (or replaces) a SCRAM-SHA-512 login, and waits until the broker accepts it. */
    public void addScramUser(String user, String password) {
        try (Admin admin = admin()) {
            admin.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(user,
                    new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), password)))
                    .all().get(30, TimeUnit.SECONDS);
            // the controller has it; the broker applies the metadata record a moment later
            boolean visible = Eventually.holdsWithin(Duration.ofSeconds(30), Duration.ofMillis(100), () ->
                    !admin.describeUserScramCredentials(List.of(user)).all().get(10, TimeUnit.SECONDS).isEmpty());
            if (!visible) {
                throw new IllegalStateException("the SCRAM login of " + user + " did not appear within 30 s");
            }
        } catch (Exception e) {
            throw new IllegalStateException("could not add the SCRAM user " + user, e);
        }
    }

    private Path serverProperties() {
        return directory.resolve("server.properties");
    }

    private void format() {
        Properties server = new Properties();
        server.put("process.roles", "broker,controller");
        server.put("node.id", "1");
        server.put("controller.quorum.voters", "1@127.0.0.1:" + controllerPort);
        server.put("listeners", "PLAINTEXT://127.0.0.1:" + brokerPort + ",CONTROLLER://127.0.0.1:" + controllerPort);
        server.put("advertised.listeners", "PLAINTEXT://" + bootstrapServers());
        server.put("controller.listener.names", "CONTROLLER");
        server.put("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT");
        certificate.ifPresent(tls -> secure(server, tls));
        server.put("log.dirs", directory.resolve("data").toString());
        server.put("offsets.topic.replication.factor", "1");
        server.put("transaction.state.log.replication.factor", "1");
        server.put("transaction.state.log.min.isr", "1");
        server.put("group.initial.rebalance.delay.ms", "0");
        server.put("auto.create.topics.enable", "false");
        // a restarted broker re-registers within seconds instead of waiting out the 9 s default session
        server.put("broker.heartbeat.interval.ms", "500");
        server.put("broker.session.timeout.ms", "2500");
        try {
            Files.createDirectories(directory);
            try (var out = Files.newBufferedWriter(serverProperties())) {
                server.store(out, "onceflow test broker");
            }
        } catch (IOException e) {
            throw new IllegalStateException("could not write " + serverProperties(), e);
        }
        Path toolLog = directory.resolve("storage-tool.log");
        String clusterId = runStorageTool(List.of("random-uuid"), toolLog);
        runStorageTool(List.of("format", "-t", clusterId, "-c", serverProperties().toString()), toolLog);
    }

    private void secure(Properties server, TestCertificates.ServerCertificate tls) {
        server.put("listeners", server.get("listeners") + ",SASL_SSL://127.0.0.1:" + saslSslPort);
        server.put("advertised.listeners", server.get("advertised.listeners") + ",SASL_SSL://" + saslSslBootstrapServers());
        server.put("listener.security.protocol.map", server.get("listener.security.protocol.map") + ",SASL_SSL:SASL_SSL");
        server.put("sasl.enabled.mechanisms", "SCRAM-SHA-512");
        server.put("listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config",
                "org.apache.kafka.common.security.scram.ScramLoginModule required;");
        server.put("ssl.keystore.location", tls.keyStore().toString());
        server.put("ssl.keystore.type", "PKCS12");
        server.put("ssl.keystore.password", TestCertificates.STORE_PASSWORD);
        server.put("ssl.key.password", TestCertificates.STORE_PASSWORD);
        server.put("authorizer.class.name", "org.apache.kafka.metadata.authorizer.StandardAuthorizer");
        // the broker's own requests and the controller's come from the plaintext listeners' anonymous user
        server.put("super.users", "User:ANONYMOUS");
        server.put("allow.everyone.if.no.acl.found", "false");
    }

    /** Runs kafka.tools.StorageTool and returns the last line it printed. */
    private String runStorageTool(List<String> args, Path toolLog) {
        try {
            long logStart = Files.exists(toolLog) ? Files.size(toolLog) : 0;
            int exit = JvmProcess.run("kafka-storage " + args.get(0), List.of("-Xmx256m"),
                    ServiceClasspath.dependencies(), "kafka.tools.StorageTool", args, toolLog, Duration.ofSeconds(60));
            String output = Files.readString(toolLog).substring((int) logStart).strip();
            if (exit != 0) {
                throw new IllegalStateException("kafka-storage " + args + " exited with " + exit + ": " + output);
            }
            return output.substring(output.lastIndexOf('\n') + 1).strip();
        } catch (IOException e) {
            throw new IllegalStateException("could not read " + toolLog, e);
        }
    }

    private void startProcess() {
        process = JvmProcess.start("kafka-broker", List.of(
                        "-Xmx512m",
                        "-Dlog4j2.configurationFile=" + log4jConfig.toUri(),
                        "-Dlog.file=" + directory.resolve("broker.log")),
                ServiceClasspath.dependencies(), MAIN_CLASS, List.of(serverProperties().toString()),
                directory.resolve("broker.out"));
        awaitReady();
    }

    /** Waits until the broker answers metadata requests. */
    private void awaitReady() {
        AtomicReference<Exception> last = new AtomicReference<>();
        boolean ready;
        try {
            // no pause between the attempts: each one waits up to 5 s for an answer
            ready = Eventually.holdsWithin(READY_TIMEOUT, Duration.ZERO, () -> {
                if (!process.isAlive()) {
                    throw new IllegalStateException("the Kafka broker exited during start-up; see " + process.log());
                }
                try (Admin admin = admin()) {
                    admin.describeCluster().nodes().get(5, TimeUnit.SECONDS);
                    return true;
                } catch (Exception e) {
                    last.set(e);
                    return false;
                }
            });
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while the Kafka broker started", e);
        }
        if (!ready) {
            throw new IllegalStateException("the Kafka broker was not ready within " + READY_TIMEOUT, last.get());
        }
    }

    /** {@code kill -9} of the broker, then a start on the same ports and data. */
    public void killAndRestart() {
        process.kill();
        startProcess();
    }

    public void createTopic(String topic, int partitions) {
        try (Admin admin = admin()) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get(30, TimeUnit.SECONDS);
        } catch (Exception e) {
            throw new IllegalStateException("could not create topic " + topic, e);
        }
    }

    public Admin admin() {
        return Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers(),
                AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "10000",
                AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000"));
    }

    @Override
    public void close() {
        if (process != null) {
            process.stop(Duration.ofSeconds(10));
        }
    }
}
