package io.onceflow.sink.postgres.internal.effects;

import io.onceflow.sink.postgres.EffectResultsTopic;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.schema.EffectOutcomesTable;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import org.apache.flink.annotation.Internal;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsSpec;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Internal. Publishes one source partition's outcomes to the results topic through a transactional
 * producer of its own, {@code onceflow-<sink prefix>-results-<topic>-<partition>}: each transaction
 * carries the outcomes after the cursor, in {@code seq} order, to one results partition (the source
 * partition modulo the topic's partitions) and commits the cursor past them in the same transaction
 * ({@link EffectResultsRelay}).
 */
@Internal
public final class ResultsPartitionPublisher implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(ResultsPartitionPublisher.class);
    /** Bounds a transaction left open by a relay that died: read_committed readers wait for it at most this long. */
    static final Duration TRANSACTION_TIMEOUT = Duration.ofMinutes(1);

    private final PostgresSinkConfig config;
    private final TopicPartition source;
    private final String resultsTopic;
    private final ConsumerGroupMetadata cursorGroup;
    private final KafkaProducer<byte[], byte[]> producer;
    private final int resultsPartition;
    /** The next outcome number to publish: read after the producer's start fenced every earlier one. */
    private long cursor;
    /** Whether the outcomes below the cursor were deleted since the start. */
    private boolean trimmed;
    private boolean warnedNumbering;

    private ResultsPartitionPublisher(PostgresSinkConfig config, TopicPartition source,
            KafkaProducer<byte[], byte[]> producer) {
        this.config = config;
        this.source = source;
        this.producer = producer;
        EffectResultsTopic results = config.effectResults();
        this.resultsTopic = results.topic();
        this.cursorGroup = new ConsumerGroupMetadata(results.cursorGroup(config.sinkPrefix()));
        this.resultsPartition = Math.floorMod(source.partition(), producer.partitionsFor(resultsTopic).size());
    }

    /** Starts the partition's producer (fencing any earlier one of it), then reads its committed cursor. */
    public static ResultsPartitionPublisher start(PostgresSinkConfig config, TopicPartition source) {
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProperties(config, source));
        try {
            producer.initTransactions();
            ResultsPartitionPublisher publisher = new ResultsPartitionPublisher(config, source, producer);
            publisher.cursor = committedCursor(config, source);
            return publisher;
        } catch (RuntimeException e) {
            producer.close(Duration.ZERO);
            throw e;
        }
    }

    static String transactionalId(String sinkPrefix, TopicPartition source) {
        return "onceflow-" + sinkPrefix + "-results-" + source.topic() + "-" + source.partition();
    }

    private static Properties producerProperties(PostgresSinkConfig config, TopicPartition source) {
        Properties properties = new Properties();
        properties.putAll(config.effectResults().kafkaClientProperties());
        properties.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId(config.sinkPrefix(), source));
        properties.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        properties.put(ProducerConfig.ACKS_CONFIG, "all");
        properties.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, (int) TRANSACTION_TIMEOUT.toMillis());
        properties.put(ProducerConfig.CLIENT_ID_CONFIG, transactionalId(config.sinkPrefix(), source));
        properties.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        properties.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return properties;
    }

    /** The committed cursor of the partition, waiting for any transaction still committing it; 0 if none. */
    private static long committedCursor(PostgresSinkConfig config, TopicPartition source) {
        String group = config.effectResults().cursorGroup(config.sinkPrefix());
        try (Admin admin = Admin.create(config.effectResults().kafkaClientProperties())) {
            Map<TopicPartition, OffsetAndMetadata> committed = admin.listConsumerGroupOffsets(
                            Map.of(group, new ListConsumerGroupOffsetsSpec().topicPartitions(List.of(source))),
                            new ListConsumerGroupOffsetsOptions().requireStable(true))
                    .partitionsToOffsetAndMetadata(group).get();
            OffsetAndMetadata cursor = committed.get(source);
            return cursor == null ? 0 : cursor.offset();
        } catch (ExecutionException e) {
            throw new KafkaException("could not read the committed cursor of " + source + " in group " + group,
                    e.getCause());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new KafkaException("interrupted while reading the cursor of " + source, e);
        }
    }

    public long cursor() {
        return cursor;
    }

    /**
     * Publishes, in one transaction, up to {@code limit} outcomes from the cursor on, if the
     * partition's highest outcome {@code head} is at or past the cursor.
     *
     * @return whether it published any
     */
    public boolean publishUpTo(Connection connection, EffectOutcomesTable outcomes, long head, int limit) throws SQLException {
        if (head < cursor) {
            if (!trimmed) { // what an earlier relay published and had not deleted when it stopped
                deletePublished(connection, outcomes, cursor - 1);
                trimmed = true;
            }
            if (head < cursor - 1 && !warnedNumbering) {
                warnedNumbering = true;
                LOG.error("The outcomes of {} in {} are numbered up to {}, below the {} the results topic {} already"
                        + " received: rows of the table were deleted by hand, and the outcomes numbered again are not"
                        + " published. Never delete a partition's last row of that table.", source, outcomes.name(),
                        head, cursor - 1, resultsTopic);
            }
            return false;
        }
        List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
        long last = -1;
        try (PreparedStatement read = connection.prepareStatement(outcomes.readQuery())) {
            read.setString(1, config.sinkPrefix());
            read.setString(2, source.topic());
            read.setInt(3, source.partition());
            read.setLong(4, cursor);
            read.setInt(5, limit);
            try (ResultSet rows = read.executeQuery()) {
                while (rows.next()) {
                    last = rows.getLong(1);
                    records.add(new ProducerRecord<>(resultsTopic, resultsPartition,
                            rows.getString(2).getBytes(StandardCharsets.UTF_8),
                            rows.getString(3).getBytes(StandardCharsets.UTF_8)));
                }
            }
        }
        if (records.isEmpty()) {
            return false;
        }
        // a failure leaves the transaction open: the relay closes this producer, and the next start of
        // its transactional id aborts it
        producer.beginTransaction();
        records.forEach(producer::send);
        producer.sendOffsetsToTransaction(Map.of(source, new OffsetAndMetadata(last + 1)), cursorGroup);
        producer.commitTransaction();
        cursor = last + 1;
        deletePublished(connection, outcomes, last);
        return true;
    }

    /** Deletes the published outcomes below {@code last}, which stays to carry the numbering on. */
    private void deletePublished(Connection connection, EffectOutcomesTable outcomes, long last) throws SQLException {
        try (PreparedStatement delete = connection.prepareStatement(outcomes.deletePublishedStatement())) {
            delete.setString(1, config.sinkPrefix());
            delete.setString(2, source.topic());
            delete.setInt(3, source.partition());
            delete.setLong(4, last);
            delete.executeUpdate();
        }
    }

    /** Closes the producer at once: a transaction it left open is aborted by the next start of its id, or times out. */
    @Override
    public void close() {
        producer.close(Duration.ZERO);
    }
}
