package io.onceflow.sink.postgres.internal;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
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
 *
 * <p>The cursor is the committed offset of the results topic's partition 0 in a consumer group named
 * as the transactional id: keyed by a topic that exists while outcomes are published, whatever
 * happens to the source topic. Kafka drops the offsets of a group without members some time after its
 * last commit ({@code offsets.retention.minutes}), so the outbox keeps a floor too: after each commit
 * the publisher marks the last outcome it published and deletes those before it; a start goes on from
 * the later of the two.
 */
@Internal
public final class ResultsPartitionPublisher implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(ResultsPartitionPublisher.class);
    private static final ObjectMapper JSON = new ObjectMapper();
    /** Bounds a transaction left open by a relay that died: read_committed readers wait for it at most this long. */
    static final Duration TRANSACTION_TIMEOUT = Duration.ofMinutes(1);
    /** A record value above this (a result the function made huge) is published without its result. */
    static final int MAX_VALUE_BYTES = 512 * 1024;

    private final PostgresSinkConfig config;
    private final TopicPartition source;
    private final String resultsTopic;
    private final ConsumerGroupMetadata cursorGroup;
    private final KafkaProducer<byte[], byte[]> producer;
    private final int resultsPartition;
    /** The next outcome number to publish: read after the producer's start fenced every earlier one. */
    private long cursor;
    private boolean warnedNumbering;

    private ResultsPartitionPublisher(PostgresSinkConfig config, TopicPartition source,
            KafkaProducer<byte[], byte[]> producer) {
        this.config = config;
        this.source = source;
        this.producer = producer;
        this.resultsTopic = config.effectResults().topic();
        this.cursorGroup = new ConsumerGroupMetadata(transactionalId(config.sinkPrefix(), source));
        this.resultsPartition = Math.floorMod(source.partition(), producer.partitionsFor(resultsTopic).size());
    }

    /**
     * Starts the partition's producer (fencing any earlier one of it), then reads its cursor: the
     * later of the one committed in Kafka and the outbox's floor.
     */
    public static ResultsPartitionPublisher start(PostgresSinkConfig config, TopicPartition source,
            Connection connection, EffectOutcomesTable outcomes) throws SQLException {
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProperties(config, source));
        try {
            producer.initTransactions();
            ResultsPartitionPublisher publisher = new ResultsPartitionPublisher(config, source, producer);
            long floor = publisher.floor(connection, outcomes);
            publisher.cursor = Math.max(publisher.committedCursor(), floor);
            if (publisher.cursor > floor) { // an earlier relay committed and stopped before it marked the outbox
                publisher.markPublished(connection, outcomes, publisher.cursor - 1);
            }
            return publisher;
        } catch (SQLException | RuntimeException e) {
            producer.close(Duration.ZERO);
            throw e;
        }
    }

    /** The transactional id, and the name of the cursor's group: a sink prefix has no '-', so no two collide. */
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

    /** The cursor committed in Kafka, 0 if none (never committed, or expired: the floor covers that). */
    private long committedCursor() {
        String group = cursorGroup.groupId();
        TopicPartition key = new TopicPartition(resultsTopic, 0);
        try (Admin admin = Admin.create(config.effectResults().kafkaClientProperties())) {
            Map<TopicPartition, OffsetAndMetadata> committed = admin.listConsumerGroupOffsets(
                            Map.of(group, new ListConsumerGroupOffsetsSpec().topicPartitions(List.of(key))),
                            new ListConsumerGroupOffsetsOptions().requireStable(true))
                    .partitionsToOffsetAndMetadata(group).get();
            OffsetAndMetadata cursor = committed.get(key);
            return cursor == null ? 0 : cursor.offset();
        } catch (ExecutionException e) {
            throw new KafkaException("could not read the committed cursor of " + source + " in group " + group,
                    e.getCause());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new KafkaException("interrupted while reading the cursor of " + source, e);
        }
    }

    private long floor(Connection connection, EffectOutcomesTable outcomes) throws SQLException {
        try (PreparedStatement query = connection.prepareStatement(outcomes.floorQuery())) {
            bindPartition(query);
            try (ResultSet floor = query.executeQuery()) {
                floor.next();
                return floor.getLong(1);
            }
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
            if (head < cursor - 1 && !warnedNumbering) {
                warnedNumbering = true;
                LOG.error("The outcomes of {} in {} are numbered up to {}, below the {} the results topic {} already"
                        + " received: the outbox lost rows (deleted by hand, or a database failover lost commits), and"
                        + " the outcomes numbered again are not published. Never delete a partition's last row of"
                        + " that table.", source, outcomes.name(), head, cursor - 1, resultsTopic);
            }
            return false;
        }
        List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
        long last = -1;
        try (PreparedStatement read = connection.prepareStatement(outcomes.readQuery())) {
            bindPartition(read);
            read.setLong(4, cursor);
            read.setInt(5, limit);
            try (ResultSet rows = read.executeQuery()) {
                while (rows.next()) {
                    last = rows.getLong(1);
                    records.add(new ProducerRecord<>(resultsTopic, resultsPartition,
                            rows.getString(2).getBytes(StandardCharsets.UTF_8), value(rows)));
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
        producer.sendOffsetsToTransaction(Map.of(new TopicPartition(resultsTopic, 0), new OffsetAndMetadata(last + 1)),
                cursorGroup);
        producer.commitTransaction();
        cursor = last + 1;
        markPublished(connection, outcomes, last);
        return true;
    }

    /**
     * Moves the outbox's floor: only for the newest run, as the floor is shared by every run's relay
     * (a replaced run's, publishing to its own results topic, would move it past what the newer run's
     * relay has to publish to another).
     */
    private void markPublished(Connection connection, EffectOutcomesTable outcomes, long last) throws SQLException {
        PostgresConnections.inTransaction(connection, () -> {
            SinkRuns.refuseIfReplacedUntilCommit(connection, config.schema().runs(), config.sinkPrefix(), config.run());
            try (PreparedStatement trim = connection.prepareStatement(outcomes.markPublishedStatement())) {
                bindPartition(trim);
                trim.setLong(4, last);
                trim.executeUpdate();
            }
        });
    }

    /** The record's value; without the result if the result makes it too large for a record. */
    private byte[] value(ResultSet row) throws SQLException {
        byte[] value = row.getString(3).getBytes(StandardCharsets.UTF_8);
        if (value.length <= MAX_VALUE_BYTES) {
            return value;
        }
        Map<String, Object> without = new LinkedHashMap<>();
        without.put("id", row.getString(2));
        without.put("status", row.getString(4));
        without.put("result_omitted", "the result is " + value.length + " bytes, more than the " + MAX_VALUE_BYTES
                + " a results record carries: read it in the events table");
        without.put("topic", source.topic());
        without.put("partition", source.partition());
        without.put("offset", row.getLong(5));
        without.put("seq", row.getLong(1));
        try {
            return JSON.writeValueAsBytes(without);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("could not write an outcome without its result", e);
        }
    }

    private void bindPartition(PreparedStatement statement) throws SQLException {
        statement.setString(1, config.sinkPrefix());
        statement.setString(2, source.topic());
        statement.setInt(3, source.partition());
    }

    /** Closes the producer at once: a transaction it left open is aborted by the next start of its id, or times out. */
    @Override
    public void close() {
        producer.close(Duration.ZERO);
    }
}
