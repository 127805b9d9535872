package io.onceflow.tools.audit;

import java.time.Duration;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NavigableSet;
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
 * Reads a topic as a {@code read_committed} consumer sees it, without a consumer group (nothing is
 * committed anywhere): whole, from the beginning up to the end offsets at the time of the call, or
 * at given offsets.
 *
 * <p>A read_committed consumer's end offset is the last stable offset: a transaction still open on
 * a partition hides it and every record after it, committed or not. {@link
 * #partitionsWithOpenTransactions} tells when that is the case.
 */
@Internal
public final class CommittedTopicReader {
    private static final int MAX_POLL_RECORDS = 5000;

    private final Properties clientProperties;

    /** @param clientProperties bootstrap.servers plus any security settings */
    public CommittedTopicReader(Properties clientProperties) {
        this.clientProperties = new Properties();
        this.clientProperties.putAll(clientProperties);
        this.clientProperties.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        this.clientProperties.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        this.clientProperties.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, String.valueOf(MAX_POLL_RECORDS));
        this.clientProperties.remove(ConsumerConfig.GROUP_ID_CONFIG);
    }

    public static CommittedTopicReader forBootstrapServers(String bootstrapServers) {
        Properties properties = new Properties();
        properties.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers);
        return new CommittedTopicReader(properties);
    }

    /** Hands every committed record of {@code topic} to {@code sink}, partition by partition in offset order. */
    public void read(String topic, Duration timeout, Consumer<ConsumerRecord<byte[], byte[]>> sink) {
        try (KafkaConsumer<byte[], byte[]> consumer = newConsumer(clientProperties)) {
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

    /**
     * Hands {@code sink} the committed records of {@code topic} at {@code offsets} (per partition), in
     * offset order: a lookup. It reads from each partition's first offset wanted, seeking over gaps
     * longer than a fetch, so a few records cost a few fetches and many cost at most one read of the
     * partition. An offset without a committed record (past the end, deleted, a transaction marker) is
     * skipped.
     */
    void readAt(String topic, Map<Integer, NavigableSet<Long>> offsets, Duration timeout,
            Consumer<ConsumerRecord<byte[], byte[]>> sink) {
        try (KafkaConsumer<byte[], byte[]> consumer = newConsumer(clientProperties)) {
            long deadline = System.nanoTime() + timeout.toNanos();
            for (Map.Entry<Integer, NavigableSet<Long>> wanted : offsets.entrySet()) {
                if (!wanted.getValue().isEmpty()) {
                    readAt(consumer, new TopicPartition(topic, wanted.getKey()), wanted.getValue().iterator(), deadline,
                            timeout, sink);
                }
            }
        }
    }

    private static void readAt(KafkaConsumer<byte[], byte[]> consumer, TopicPartition partition, Iterator<Long> wanted,
            long deadline, Duration timeout, Consumer<ConsumerRecord<byte[], byte[]>> sink) {
        consumer.assign(List.of(partition));
        long end = consumer.endOffsets(List.of(partition), timeout).get(partition);
        Long next = wanted.next();
        consumer.seek(partition, next);
        while (next != null && consumer.position(partition, timeout) < end) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("a read_committed consumer of " + partition
                        + " did not reach offset " + next + " within " + timeout);
            }
            for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
                while (next != null && next < record.offset()) {
                    next = wanted.hasNext() ? wanted.next() : null; // no committed record there
                }
                if (next == null) {
                    return;
                }
                if (record.offset() == next) {
                    sink.accept(record);
                    next = wanted.hasNext() ? wanted.next() : null;
                }
            }
            if (next != null && next > consumer.position(partition, timeout) + MAX_POLL_RECORDS) {
                consumer.seek(partition, next);
            }
        }
    }

    /**
     * The partitions of {@code topic} on which a transaction is open now: their last stable offset,
     * where a read_committed consumer stops, is behind their high watermark.
     */
    List<Integer> partitionsWithOpenTransactions(String topic, Duration timeout) {
        Properties uncommitted = new Properties();
        uncommitted.putAll(clientProperties);
        uncommitted.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_uncommitted");
        try (KafkaConsumer<byte[], byte[]> stable = newConsumer(clientProperties);
                KafkaConsumer<byte[], byte[]> written = newConsumer(uncommitted)) {
            List<TopicPartition> partitions = stable.partitionsFor(topic, timeout).stream()
                    .map(info -> new TopicPartition(topic, info.partition()))
                    .collect(Collectors.toList());
            Map<TopicPartition, Long> lastStable = stable.endOffsets(partitions, timeout);
            Map<TopicPartition, Long> highWatermark = written.endOffsets(partitions, timeout);
            return partitions.stream()
                    .filter(partition -> lastStable.get(partition) < highWatermark.get(partition))
                    .map(TopicPartition::partition)
                    .sorted()
                    .collect(Collectors.toList());
        }
    }

    private static KafkaConsumer<byte[], byte[]> newConsumer(Properties properties) {
        return new KafkaConsumer<>(properties, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }
}
