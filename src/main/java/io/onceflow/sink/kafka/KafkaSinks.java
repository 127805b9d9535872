package io.onceflow.sink.kafka;

import io.onceflow.api.Event;
import io.onceflow.ingest.DeadLetter;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import org.apache.flink.annotation.Internal;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.util.function.SerializableFunction;
import org.apache.kafka.clients.producer.ProducerConfig;

/**
 * Builds the output and dead-letter {@link KafkaSink}s. With {@link DeliveryGuarantee#EXACTLY_ONCE}
 * records are written in Kafka transactions that commit when the checkpoint covering them
 * completes, so a {@code read_committed} consumer sees each exactly once.
 *
 * <p>The two sinks of a job get transactional id prefixes {@code <prefix>-output} and
 * {@code <prefix>-dlq}, to which each attempt adds its tag ({@code -<tag>-<subtask>-<n>}); the
 * prefix must be stable across restarts (recovery finds and aborts the lingering transactions of
 * earlier attempts by it) and unique among jobs on a cluster.
 */
@Internal
public final class KafkaSinks {
    private static final String OUTPUT_SUFFIX = "-output";
    private static final String DEAD_LETTER_SUFFIX = "-dlq";

    private final String bootstrapServers;
    private final Properties clientProperties;
    private final DeliveryGuarantee guarantee;
    private final String transactionalIdPrefix;
    private final Duration transactionTimeout;
    private final KafkaWriterGate writerGate;

    /**
     * @param clientProperties pass-through client settings (security.protocol, sasl.*, ssl.*)
     * @param transactionTimeout must outlive the longest checkpoint plus restart, and stay within the
     *     broker's transaction.max.timeout.ms (15 min by default)
     * @param writerGate what each writer attempt passes before it creates a producer (see
     *     {@link GuardedKafkaSink}); {@link KafkaWriterGate#OPEN} for none
     */
    public KafkaSinks(String bootstrapServers, Properties clientProperties, DeliveryGuarantee guarantee,
            String transactionalIdPrefix, Duration transactionTimeout, KafkaWriterGate writerGate) {
        if (guarantee == DeliveryGuarantee.NONE) {
            throw new IllegalArgumentException("onceflow writes exactly-once or at-least-once; NONE would lose records");
        }
        this.bootstrapServers = bootstrapServers;
        this.clientProperties = new Properties();
        this.clientProperties.putAll(clientProperties);
        this.guarantee = guarantee;
        this.transactionalIdPrefix = transactionalIdPrefix;
        this.transactionTimeout = transactionTimeout;
        this.writerGate = writerGate;
    }

    /** The sink of processed events: key = message id, value = payload. */
    public Sink<Event> output(String topic) {
        return build(new EventRecordSerializer(topic), OUTPUT_SUFFIX);
    }

    /** The sink of dead letters: original key and value, reason in headers. */
    public Sink<DeadLetter> deadLetters(String topic) {
        return build(new DeadLetterRecordSerializer(topic), DEAD_LETTER_SUFFIX);
    }

    /**
     * The transactional id prefixes of a job's two sinks; each attempt appends
     * {@code -<tag>-<subtask>-<n>} to them (see {@link GuardedKafkaSink}).
     */
    public static List<String> transactionalIdPrefixes(String transactionalIdPrefix) {
        return List.of(transactionalIdPrefix + OUTPUT_SUFFIX, transactionalIdPrefix + DEAD_LETTER_SUFFIX);
    }

    /**
     * The settings of the sinks' producers, without bootstrap servers and transactional id: the
     * pass-through {@code clientProperties} with what onceflow decides for itself (the transaction
     * timeout, {@code acks=all}, idempotence) on top. The start check's probe producer takes the same,
     * so that it is refused exactly when the sinks' producers would be.
     */
    public static Properties producerProperties(Properties clientProperties, Duration transactionTimeout) {
        Properties producer = new Properties();
        // Fewer, larger produce requests: the task thread and the broker pay per request, and
        // records wait for the checkpoint (exactly-once) far longer than linger.ms anyway. The same
        // for both guarantees; clientProperties may override them.
        producer.setProperty(ProducerConfig.LINGER_MS_CONFIG, "20");
        producer.setProperty(ProducerConfig.BATCH_SIZE_CONFIG, String.valueOf(64 * 1024));
        producer.putAll(clientProperties);
        producer.setProperty(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, String.valueOf(transactionTimeout.toMillis()));
        producer.setProperty(ProducerConfig.ACKS_CONFIG, "all");
        producer.setProperty(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        return producer;
    }

    /**
     * A {@link KafkaSink} in a {@link GuardedKafkaSink}: no producer before the gate, each
     * exactly-once attempt under its own transactional ids, and a writer closed after a newer attempt
     * fenced its producer does not take its TaskManager down.
     */
    private <T> Sink<T> build(KafkaRecordSerializationSchema<T> serializer, String prefixSuffix) {
        Properties producer = producerProperties(clientProperties, transactionTimeout);
        String sinkPrefix = transactionalIdPrefix + prefixSuffix;
        String servers = bootstrapServers;
        DeliveryGuarantee sinkGuarantee = guarantee;
        SerializableFunction<String, KafkaSink<T>> withPrefix = prefix -> KafkaSink.<T>builder()
                .setBootstrapServers(servers)
                .setKafkaProducerConfig(producer)
                .setRecordSerializer(serializer)
                .setDeliveryGuarantee(sinkGuarantee)
                .setTransactionalIdPrefix(prefix)
                .build();
        return new GuardedKafkaSink<>(withPrefix.apply(sinkPrefix),
                guarantee == DeliveryGuarantee.EXACTLY_ONCE ? withPrefix : null, sinkPrefix, writerGate,
                bootstrapServers, clientProperties);
    }
}
