package io.onceflow.tools.audit;

import static java.nio.charset.StandardCharsets.UTF_8;

import io.onceflow.config.PostgresSettings;
import io.onceflow.ingest.DeadLetterReason;
import io.onceflow.sink.kafka.OnceflowHeaders;
import io.onceflow.sink.postgres.internal.PostgresSchema;
import io.onceflow.testing.PipelineScenario;
import java.sql.Connection;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;

/**
 * A scenario's input, output, dead letters and rows written here as the job writes them (the job's
 * own headers, processor dead letters keyed by the source key, filter records without a value),
 * against the real broker and database: so that an audit test can make a loss, a duplicate or a
 * redelivery where a real run cannot make one. Close it to close its producer.
 */
final class JobRecords implements AutoCloseable {
    private final PipelineScenario scenario;
    private final PostgresSettings postgres;
    private final KafkaProducer<byte[], byte[]> producer;
    /** The first input record of each id, for the outputs and dead letters that name it as their source. */
    private final Map<String, RecordMetadata> input = new HashMap<>();

    /** Creates the scenario's tables; the scenario must have PostgreSQL. */
    JobRecords(PipelineScenario scenario) throws Exception {
        this.scenario = scenario;
        this.postgres = scenario.config().postgres().orElseThrow();
        this.producer = scenario.kafka().newProducer();
        try (Connection connection = scenario.database().connect()) {
            new PostgresSchema(postgres.tables()).createIfMissing(connection);
        }
    }

    /** An input record as a producer of the job's input writes it: the id in the default header. */
    RecordMetadata in(String id) {
        return in(id, null, null);
    }

    /** As {@link #in(String)}, to a partition (or any, when null) and with a record time (or now, when null). */
    RecordMetadata in(String id, Integer partition, Long recordTime) {
        RecordMetadata metadata = send(producer, scenario.inputTopic, partition, recordTime, id.getBytes(UTF_8),
                ("{\"id\": \"" + id + "\"}").getBytes(UTF_8),
                new RecordHeader(OnceflowHeaders.MESSAGE_ID, id.getBytes(UTF_8)));
        input.putIfAbsent(id, metadata);
        return metadata;
    }

    /** The first input record of {@code id}. */
    RecordMetadata firstInput(String id) {
        return input.get(id);
    }

    /** A poison record: not JSON. */
    RecordMetadata poison(String key) {
        return send(producer, scenario.inputTopic, null, null, key.getBytes(UTF_8), "not json".getBytes(UTF_8),
                new RecordHeader(OnceflowHeaders.MESSAGE_ID, (key + "-id").getBytes(UTF_8)));
    }

    /** An output record as the job writes it: keyed by id, naming its source record. */
    void output(String id, RecordMetadata source) {
        output(producer, id, source);
    }

    /** As {@link #output(String, RecordMetadata)}, with {@code producer} (e.g. in a transaction of its own). */
    void output(Producer<byte[], byte[]> producer, String id, RecordMetadata source) {
        output(producer, id, source, null);
    }

    /**
     * As {@link #output(String, RecordMetadata)}, written at {@code writtenTime}: the job's sink
     * leaves an output's timestamp to its producer, so an output's timestamp is when the job wrote it.
     */
    void output(String id, RecordMetadata source, long writtenTime) {
        output(producer, id, source, writtenTime);
    }

    private void output(Producer<byte[], byte[]> producer, String id, RecordMetadata source, Long writtenTime) {
        List<Header> headers = new ArrayList<>(sourceHeaders(source));
        headers.add(new RecordHeader(OnceflowHeaders.MESSAGE_ID, id.getBytes(UTF_8)));
        send(producer, scenario.outputTopic, null, writtenTime, id.getBytes(UTF_8), "{}".getBytes(UTF_8),
                headers.toArray(Header[]::new));
    }

    /** A dead letter as the job writes it: the reason and the source record's coordinates; a filter record has no value. */
    void deadLetter(byte[] key, DeadLetterReason reason, RecordMetadata source) {
        deadLetter(key, reason, source, null);
    }

    /** As {@link #deadLetter(byte[], DeadLetterReason, RecordMetadata)}, written at {@code writtenTime} (now, when null). */
    void deadLetter(byte[] key, DeadLetterReason reason, RecordMetadata source, Long writtenTime) {
        List<Header> headers = new ArrayList<>(sourceHeaders(source));
        headers.add(new RecordHeader(OnceflowHeaders.DEAD_LETTER_REASON, reason.name().getBytes(UTF_8)));
        headers.add(new RecordHeader(OnceflowHeaders.DEAD_LETTER_ERROR, "why".getBytes(UTF_8)));
        byte[] value = reason == DeadLetterReason.FILTERED_BY_PROCESSOR ? null : "{}".getBytes(UTF_8);
        send(producer, scenario.deadLetterTopic, null, writtenTime, key, value, headers.toArray(Header[]::new));
    }

    /** A row of the events table, from no source, with an effect result. */
    void row(String id, String result) throws Exception {
        scenario.database().execute("INSERT INTO " + postgres.table() + " (id, payload, result) VALUES ('" + id
                + "', '{}', '" + result + "')");
    }

    /** A row of the events table as the sink writes it: from {@code source}, {@code deliveries} times. */
    void row(String id, RecordMetadata source, int deliveries) throws Exception {
        scenario.database().execute("INSERT INTO " + postgres.table() + " (id, payload, source_topic, source_partition,"
                + " source_offset, deliveries) VALUES ('" + id + "', '{}', '" + source.topic() + "', "
                + source.partition() + ", " + source.offset() + ", " + deliveries + ")");
    }

    private static List<Header> sourceHeaders(RecordMetadata source) {
        return List.of(new RecordHeader(OnceflowHeaders.SOURCE_TOPIC, source.topic().getBytes(UTF_8)),
                new RecordHeader(OnceflowHeaders.SOURCE_PARTITION, String.valueOf(source.partition()).getBytes(UTF_8)),
                new RecordHeader(OnceflowHeaders.SOURCE_OFFSET, String.valueOf(source.offset()).getBytes(UTF_8)));
    }

    private static RecordMetadata send(Producer<byte[], byte[]> producer, String topic, Integer partition,
            Long recordTime, byte[] key, byte[] value, Header... headers) {
        try {
            var sent = producer.send(new ProducerRecord<>(topic, partition, recordTime, key, value, List.of(headers)));
            producer.flush();
            return sent.get();
        } catch (Exception e) {
            throw new IllegalStateException("could not write to " + topic, e);
        }
    }

    @Override
    public void close() {
        producer.close();
    }
}
