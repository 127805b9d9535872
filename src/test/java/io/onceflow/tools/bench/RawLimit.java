package io.onceflow.tools.bench;

import static java.nio.charset.StandardCharsets.UTF_8;

import io.onceflow.sink.postgres.internal.PostgresSchema;
import io.onceflow.testing.TestKafka;
import io.onceflow.testing.TestPostgres;
import java.io.ByteArrayOutputStream;
import java.sql.Connection;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.function.Consumer;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.postgresql.PGConnection;
import org.postgresql.copy.CopyIn;

/**
 * The raw limit, without Flink: at the same time, (1) a plain kafka-clients copy of the input topic
 * to another topic (no transactions; the producer settings of the job's at-least-once sink:
 * idempotent, acks=all) and (2) one plain {@code COPY} of the same rows (first occurrence of each
 * id) into a table like the job's. The limit is the input records over the time both took.
 */
final class RawLimit {
    private static final String TABLE = "raw_events";
    /** Rows per write to the COPY stream: large enough that the stream, not the calls, dominates. */
    private static final int COPY_CHUNK_ROWS = 1000;

    private final TestKafka kafka;
    private final String inputTopic;
    private final long inputRecords;

    RawLimit(TestKafka kafka, String inputTopic, long inputRecords) {
        this.kafka = kafka;
        this.inputTopic = inputTopic;
        this.inputRecords = inputRecords;
    }

    /** Runs both copies at once and returns the wall time of the slower, in seconds. */
    double run() throws Exception {
        String outputTopic = TestKafka.uniqueTopic("bench-raw-out");
        kafka.createTopics(4, outputTopic);
        TestPostgres.TestDatabase database = TestPostgres.shared().newDatabase();
        try (Connection connection = database.connect()) {
            new PostgresSchema(TABLE, "raw_rejects", "raw_commit_log", "raw_runs", "raw_writers")
                    .createIfMissing(connection);
        }
        // two threads of their own: the common pool has a single thread on a 2-core machine
        ExecutorService threads = Executors.newFixedThreadPool(2);
        try {
            long start = System.nanoTime();
            CompletableFuture<Void> kafkaCopy = CompletableFuture.runAsync(() -> copyTopic(outputTopic), threads);
            CompletableFuture<Long> postgresCopy =
                    CompletableFuture.supplyAsync(() -> copyIntoPostgres(database), threads);
            CompletableFuture.allOf(kafkaCopy, postgresCopy).get();
            double seconds = (System.nanoTime() - start) / 1e9;
            Benchmark.say(String.format("raw limit: %,d records copied topic to topic and %,d rows COPYed in %.1f s",
                    inputRecords, postgresCopy.get(), seconds));
            return seconds;
        } finally {
            threads.shutdown();
        }
    }

    private void copyTopic(String outputTopic) {
        try (KafkaProducer<byte[], byte[]> producer = kafka.newProducer()) {
            readInput(record -> producer.send(new ProducerRecord<>(
                    outputTopic, null, null, record.key(), record.value(), record.headers())));
            producer.flush();
        }
    }

    private long copyIntoPostgres(TestPostgres.TestDatabase database) {
        try (Connection connection = database.connect()) {
            CopyIn copy = connection.unwrap(PGConnection.class).getCopyAPI().copyIn("COPY " + TABLE
                    + " (id, payload, source_topic, source_partition, source_offset) FROM STDIN");
            Set<String> seen = new HashSet<>();
            ByteArrayOutputStream rows = new ByteArrayOutputStream(COPY_CHUNK_ROWS * 300);
            long[] pending = {0};
            readInput(record -> {
                Header idHeader = record.headers().lastHeader("message-id");
                String id = new String(idHeader.value(), UTF_8);
                if (!seen.add(id)) {
                    return;
                }
                String row = escape(id) + '\t' + escape(new String(record.value(), UTF_8)) + '\t'
                        + escape(record.topic()) + '\t' + record.partition() + '\t' + record.offset() + '\n';
                rows.writeBytes(row.getBytes(UTF_8));
                if (++pending[0] % COPY_CHUNK_ROWS == 0) {
                    writeChunk(copy, rows);
                }
            });
            writeChunk(copy, rows);
            return copy.endCopy();
        } catch (Exception e) {
            throw new IllegalStateException("the raw COPY failed", e);
        }
    }

    private static void writeChunk(CopyIn copy, ByteArrayOutputStream rows) {
        try {
            copy.writeToCopy(rows.toByteArray(), 0, rows.size());
            rows.reset();
        } catch (Exception e) {
            throw new IllegalStateException("the raw COPY failed", e);
        }
    }

    /** COPY's text format: backslash, tab and line breaks are escaped. */
    private static String escape(String value) {
        return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r");
    }

    /** Hands every record of the input topic to {@code sink}, without a consumer group. */
    private void readInput(Consumer<ConsumerRecord<byte[], byte[]>> sink) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
        props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "5000");
        try (KafkaConsumer<byte[], byte[]> consumer =
                new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            List<TopicPartition> partitions = consumer.partitionsFor(inputTopic).stream()
                    .map(p -> new TopicPartition(inputTopic, p.partition())).toList();
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> end = consumer.endOffsets(partitions);
            long read = 0;
            while (partitions.stream().anyMatch(tp -> consumer.position(tp) < end.get(tp))) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
                    sink.accept(record);
                    read++;
                }
            }
            if (read != inputRecords) {
                throw new IllegalStateException("the raw copy read " + read + " records, expected " + inputRecords);
            }
        }
    }
}
