package io.onceflow.tools.bench;

import io.onceflow.testing.TestPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Watches a job's outputs as their readers see them: a {@code read_committed} consumer of the output
 * topic (counting records, for throughput, and timing the ids in {@link #sendTimes}, for latency)
 * and, for a job with a PostgreSQL sink, a poller of its table (counting rows on request, and timing
 * the ids in {@link #postgresSample}).
 *
 * <p>Latency is the wall clock when an id became visible minus the producer timestamp of the input
 * record that carried it; both clocks are this JVM's. Resolution: one consumer fetch (at most
 * {@value #KAFKA_POLL_MS} ms) and one PostgreSQL poll ({@value #POSTGRES_POLL_MS} ms). With an effect
 * function, "effect applied" is when the id's row has a {@code result}: the effect worker's transaction
 * that called the function and stored the result committed (the same poll).
 */
final class VisibilityProbes implements AutoCloseable {
    private static final long KAFKA_POLL_MS = 20;
    private static final long POSTGRES_POLL_MS = 50;

    /** Producer timestamp (epoch ms) of each id whose visibility latency is wanted. */
    final Map<String, Long> sendTimes = new ConcurrentHashMap<>();
    /** Ids to time in PostgreSQL too: a sample, since each poll looks them up one by one. */
    final Map<String, Long> postgresSample = new ConcurrentHashMap<>();
    /**
     * Ids whose effect is timed: until their row has a {@code result} (the effect's transaction
     * committed). Filled only for a job with an effect function.
     */
    final Map<String, Long> effectSample = new ConcurrentHashMap<>();

    private final KafkaConsumer<String, byte[]> consumer;
    /** Null for a Kafka-only scenario, as are {@link #table} and {@link #postgresWatcher}. */
    private final TestPostgres.TestDatabase database;
    private final String table;
    private final Thread kafkaWatcher;
    private final Thread postgresWatcher;
    private final AtomicLong visibleRecords = new AtomicLong();
    private final List<Long> kafkaLatencies = new ArrayList<>();
    private final List<Long> postgresLatencies = new ArrayList<>();
    private final List<Long> effectLatencies = new ArrayList<>();
    private volatile boolean running = true;

    /** Watches {@code topic} and {@code table} of {@code database}. */
    static VisibilityProbes withPostgres(String bootstrapServers, String topic, TestPostgres.TestDatabase database,
            String table) {
        return new VisibilityProbes(bootstrapServers, topic, database, table);
    }

    /** Watches {@code topic} only. */
    static VisibilityProbes kafkaOnly(String bootstrapServers, String topic) {
        return new VisibilityProbes(bootstrapServers, topic, null, null);
    }

    private VisibilityProbes(String bootstrapServers, String topic, TestPostgres.TestDatabase database, String table) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers);
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "5000");
        // Fetches of at least 64 KB or every poll interval, whichever comes first: with the default
        // (answer as soon as there is a byte) this consumer fetched almost record by record from an
        // at-least-once job's output, which is visible at once, and that broker and consumer work,
        // in this JVM, was charged to the at-least-once job (bench-kafka-visibility thread 2.2 s
        // against 0.7 s for exactly-once, whose output becomes visible in per-checkpoint bursts).
        props.put(ConsumerConfig.FETCH_MIN_BYTES_CONFIG, String.valueOf(64 * 1024));
        props.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, String.valueOf(KAFKA_POLL_MS));
        consumer = new KafkaConsumer<>(props, new StringDeserializer(), new ByteArrayDeserializer());
        List<TopicPartition> partitions = consumer.partitionsFor(topic).stream()
                .map(p -> new TopicPartition(topic, p.partition())).toList();
        consumer.assign(partitions);
        consumer.seekToBeginning(partitions);
        this.database = database;
        this.table = table;
        kafkaWatcher = new Thread(this::watchKafka, "bench-kafka-visibility");
        postgresWatcher = database == null ? null : new Thread(this::watchPostgres, "bench-postgres-visibility");
        kafkaWatcher.start();
        if (postgresWatcher != null) {
            postgresWatcher.start();
        }
    }

    private void watchKafka() {
        while (running) {
            ConsumerRecords<String, byte[]> records = consumer.poll(Duration.ofMillis(KAFKA_POLL_MS));
            if (records.isEmpty()) {
                continue;
            }
            long now = System.currentTimeMillis();
            synchronized (kafkaLatencies) {
                for (ConsumerRecord<String, byte[]> record : records) {
                    Long sent = sendTimes.remove(record.key());
                    if (sent != null) {
                        kafkaLatencies.add(now - sent);
                    }
                }
            }
            visibleRecords.addAndGet(records.count());
        }
        consumer.close();
    }

    private void watchPostgres() {
        try (Connection connection = database.connect();
                PreparedStatement lookup = connection.prepareStatement(
                        "SELECT id FROM " + table + " WHERE id = ANY(?)");
                PreparedStatement applied = connection.prepareStatement(
                        "SELECT id FROM " + table + " WHERE id = ANY(?) AND result IS NOT NULL")) {
            while (running) {
                Thread.sleep(POSTGRES_POLL_MS);
                time(connection, lookup, postgresSample, postgresLatencies);
                time(connection, applied, effectSample, effectLatencies);
            }
        } catch (SQLException | InterruptedException e) {
            if (running) {
                throw new IllegalStateException("the PostgreSQL visibility probe failed", e);
            }
        }
    }

    /** Removes the ids of {@code sample} that {@code query} returns, adding their latency to {@code latencies}. */
    private static void time(Connection connection, PreparedStatement query, Map<String, Long> sample,
            List<Long> latencies) throws SQLException {
        if (sample.isEmpty()) {
            return;
        }
        query.setArray(1, connection.createArrayOf("text", sample.keySet().toArray()));
        try (ResultSet visible = query.executeQuery()) {
            long now = System.currentTimeMillis();
            synchronized (latencies) {
                while (visible.next()) {
                    Long sent = sample.remove(visible.getString(1));
                    if (sent != null) {
                        latencies.add(now - sent);
                    }
                }
            }
        }
    }

    long visibleRecords() {
        return visibleRecords.get();
    }

    /** Rows in the table now. */
    long postgresRows() throws SQLException {
        try (Connection connection = database.connect();
                Statement statement = connection.createStatement();
                ResultSet count = statement.executeQuery("SELECT count(*) FROM " + table)) {
            count.next();
            return count.getLong(1);
        }
    }

    /**
     * Whether effects are still queued ({@code <table>_effect_queue}): false when every committed
     * row's effect is applied. Not a count: polled every 50 ms, a count of a long queue cost the server
     * about a tenth of what the effect scenario measured.
     */
    boolean effectsQueued() throws SQLException {
        try (Connection connection = database.connect();
                Statement statement = connection.createStatement();
                ResultSet queued = statement.executeQuery("SELECT EXISTS (SELECT FROM " + table + "_effect_queue)")) {
            queued.next();
            return queued.getBoolean(1);
        }
    }

    long[] effectLatencies() {
        synchronized (effectLatencies) {
            return effectLatencies.stream().mapToLong(Long::longValue).toArray();
        }
    }

    long[] kafkaLatencies() {
        synchronized (kafkaLatencies) {
            return kafkaLatencies.stream().mapToLong(Long::longValue).toArray();
        }
    }

    long[] postgresLatencies() {
        synchronized (postgresLatencies) {
            return postgresLatencies.stream().mapToLong(Long::longValue).toArray();
        }
    }

    @Override
    public void close() throws InterruptedException {
        running = false;
        kafkaWatcher.join();
        if (postgresWatcher != null) {
            postgresWatcher.join();
        }
    }
}
