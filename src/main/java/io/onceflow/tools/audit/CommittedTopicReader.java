package io.onceflow.tools.audit;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.function.Consumer;
import java.util.stream.Collectors;
import org.apache.flink.annotation.Internal;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Reads a whole topic as a {@code read_committed} consumer sees it, from the beginning up to the end
 * offsets at the time of the call, without a consumer group (nothing is committed anywhere).
 *
 * <p>A read_committed consumer cannot pass the last stable offset, so a transaction left open on
 * the topic makes the read time out with a message that says so: a hanging transaction is a
 * finding, not something to wait out.
 */
@Internal
public final class CommittedTopicReader {
    private final Properties clientProperties;

    /** @param clientProperties bootstrap.servers plus any security settings */
    public CommittedTopicReader(Properties clientProperties) {
        this.clientProperties = new Properties();
        this.clientProperties.putAll(clientProperties);
        this.clientProperties.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        this.clientProperties.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        this.clientProperties.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "5000");
        this.clientProperties.remove(ConsumerConfig.GROUP_ID_CONFIG);
    }

    public static CommittedTopicReader forBootstrapServers(String bootstrapServers) {
        Properties properties = new Properties();
        properties.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers);
        return new CommittedTopicReader(properties);
    }

    /** Hands every committed record of {@code topic} to {@code sink}, partition by partition in offset order. */
    public void read(String topic, Duration timeout, Consumer<ConsumerRecord<byte[], byte[]>> sink) {
        try (KafkaConsumer<byte[], byte[]> consumer =
                new KafkaConsumer<>(clientProperties, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            List<TopicPartition> partitions = consumer.partitionsFor(topic, timeout).stream()
                    .map(info -> new TopicPartition(topic, info.partition()))
                    .collect(Collectors.toList());
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> end = consumer.endOffsets(partitions, timeout);
            long deadline = System.nanoTime() + timeout.toNanos();
            while (partitions.stream().anyMatch(tp -> consumer.position(tp, timeout) < end.get(tp))) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("a read_committed consumer of " + topic
                            + " did not reach the end offsets " + end + " within " + timeout
                            + ": a transaction is still open on the topic");
                }
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
                    if (record.offset() < end.get(new TopicPartition(record.topic(), record.partition()))) {
                        sink.accept(record);
                    }
                }
            }
        }
    }
}
