package io.onceflow.testing;

import io.onceflow.tools.audit.CommittedTopicReader;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.test.KafkaClusterTestKit;
import org.apache.kafka.common.test.TestKitNodes;

/**
 * The Kafka broker that tests and the demo talk to: a real KRaft broker embedded in this JVM
 * (Kafka's own {@link KafkaClusterTestKit}), or an external one when the environment variable
 * {@value #EXTERNAL_BOOTSTRAP_ENV} names its bootstrap servers. One per JVM, started on first use.
 */
public final class TestKafka implements AutoCloseable {
    /** Set to {@code host:port[,host:port]} to run the suites against an external broker. */
    public static final String EXTERNAL_BOOTSTRAP_ENV = "ONCEFLOW_TEST_KAFKA_BOOTSTRAP";

    private static TestKafka shared;

    private final String bootstrapServers;
    private final KafkaClusterTestKit embedded;

    private TestKafka(String bootstrapServers, KafkaClusterTestKit embedded) {
        this.bootstrapServers = bootstrapServers;
        this.embedded = embedded;
    }

    /** The broker of this JVM, started on first call. */
    public static synchronized TestKafka shared() {
        if (shared == null) {
            String external = System.getenv(EXTERNAL_BOOTSTRAP_ENV);
            shared = external != null && !external.isBlank() ? new TestKafka(external, null) : startEmbedded();
            Runtime.getRuntime().addShutdownHook(new Thread(shared::close, "test-kafka-shutdown"));
        }
        return shared;
    }

    /**
     * A broker of the caller's own, embedded in this JVM, with {@code brokerSettings} on top of the
     * shared one's (e.g. a lower transaction.max.timeout.ms); the caller closes it.
     */
    public static TestKafka startOwn(Map<String, String> brokerSettings) {
        return startEmbedded(temporaryDirectory(), brokerSettings);
    }

    /** As {@link #startOwn(Map)}, with the broker's data in {@code baseDirectory}. */
    public static TestKafka startOwn(Path baseDirectory, Map<String, String> brokerSettings) {
        return startEmbedded(baseDirectory, brokerSettings);
    }

    private static TestKafka startEmbedded() {
        return startEmbedded(temporaryDirectory(), Map.of());
    }

    private static Path temporaryDirectory() {
        try {
            return Files.createTempDirectory("onceflow-kafka");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static TestKafka startEmbedded(Path baseDirectory, Map<String, String> brokerSettings) {
        try {
            TestKitNodes nodes = new TestKitNodes.Builder()
                    .setCombined(true)
                    .setNumBrokerNodes(1)
                    .setNumControllerNodes(1)
                    .setBaseDirectory(baseDirectory)
                    .build();
            KafkaClusterTestKit.Builder builder = new KafkaClusterTestKit.Builder(nodes)
                    .setConfigProp("offsets.topic.replication.factor", "1")
                    .setConfigProp("transaction.state.log.replication.factor", "1")
                    .setConfigProp("transaction.state.log.min.isr", "1")
                    .setConfigProp("group.initial.rebalance.delay.ms", "0")
                    .setConfigProp("num.partitions", "4")
                    .setConfigProp("auto.create.topics.enable", "false")
                    .setDeleteOnClose(true);
            brokerSettings.forEach(builder::setConfigProp);
            KafkaClusterTestKit cluster = builder.build();
            cluster.format();
            cluster.startup();
            cluster.waitForReadyBrokers();
            return new TestKafka(cluster.bootstrapServers(), cluster);
        } catch (Exception e) {
            throw new IllegalStateException("could not start the embedded Kafka broker", e);
        }
    }

    public String bootstrapServers() {
        return bootstrapServers;
    }

    /** A topic name that no other test uses, so tests share the broker without sharing data. */
    public static String uniqueTopic(String purpose) {
        return purpose + "-" + UUID.randomUUID().toString().substring(0, 8);
    }

    public void createTopics(int partitions, String... topics) {
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers))) {
            List<NewTopic> newTopics = new ArrayList<>();
            for (String topic : topics) {
                newTopics.add(new NewTopic(topic, partitions, (short) 1));
            }
            admin.createTopics(newTopics).all().get(30, TimeUnit.SECONDS);
            awaitLeaders(admin, List.of(topics), partitions);
        } catch (Exception e) {
            throw new IllegalStateException("could not create topics " + List.of(topics), e);
        }
    }

    /**
     * Waits until every partition of {@code topics} has a leader. A topic's creation returns before
     * that; a producer that writes at once gets retriable errors on its first batches, and an
     * idempotent producer whose first batch to a partition is retried after a later batch got in fails
     * with OutOfOrderSequenceException (KAFKA-14359: the broker accepts any first sequence number), which
     * is how the benchmark's input production died on a loaded machine.
     */
    private static void awaitLeaders(Admin admin, List<String> topics, int partitions) throws Exception {
        boolean led = Eventually.holdsWithin(Duration.ofSeconds(30), Duration.ofMillis(50), () -> {
            Map<String, TopicDescription> descriptions;
            try {
                descriptions = admin.describeTopics(topics).allTopicNames().get(10, TimeUnit.SECONDS);
            } catch (ExecutionException notYetKnown) {
                descriptions = Map.of();
            }
            return descriptions.size() == topics.size() && descriptions.values().stream().allMatch(topic ->
                    topic.partitions().size() == partitions
                            && topic.partitions().stream().allMatch(partition -> partition.leader() != null
                                    && !partition.leader().isEmpty()));
        });
        if (!led) {
            throw new IllegalStateException("partitions of " + topics + " have no leader after 30 s");
        }
    }

    /**
     * An idempotent producer (acks=all) of raw bytes, with one request in flight per broker: a retried
     * batch can then never be overtaken by a later one (see {@link #awaitLeaders}); larger batches make
     * up for the throughput.
     */
    public KafkaProducer<byte[], byte[]> newProducer() {
        return newProducer(bootstrapServers);
    }

    /** As {@link #newProducer()}, for the broker at {@code bootstrapServers}. */
    public static KafkaProducer<byte[], byte[]> newProducer(String bootstrapServers) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "1");
        props.put(ProducerConfig.BATCH_SIZE_CONFIG, String.valueOf(256 * 1024));
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        return new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer());
    }

    /** Every record of {@code topic} that a {@code read_committed} consumer sees now. */
    public List<ConsumerRecord<byte[], byte[]>> readCommitted(String topic, Duration timeout) {
        List<ConsumerRecord<byte[], byte[]>> records = new ArrayList<>();
        CommittedTopicReader.forBootstrapServers(bootstrapServers).read(topic, timeout, records::add);
        return records;
    }

    @Override
    public void close() {
        if (embedded != null) {
            try {
                embedded.close();
            } catch (Exception e) {
                System.err.println("embedded Kafka did not close cleanly: " + e);
            }
        }
    }
}
