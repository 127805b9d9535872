package io.onceflow.tools.audit;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.config.PostgresSettings;
import io.onceflow.ingest.DeadLetterReason;
import io.onceflow.sink.kafka.OnceflowHeaders;
import io.onceflow.sink.postgres.internal.schema.PostgresSchema;
import io.onceflow.testing.PipelineScenario;
import java.sql.Connection;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The audit of a deployment whose processor rejects and fails on some ids and derives a refund from
 * another, against the real broker and database: the records and rows are written here as the job
 * writes them (the job's own headers, processor dead letters keyed by message id, ingest's by the
 * original key), so that a loss or a duplicate can be injected where a real run cannot make one.
 */
class AuditOutcomesTest {
    private final PipelineScenario scenario = new PipelineScenario("audit").withPostgres();
    private final PostgresSettings postgres = scenario.config().postgres().orElseThrow();
    private final KafkaProducer<byte[], byte[]> producer = scenario.kafka().newProducer();
    /** The input records by id, for the outputs and dead letters that name them as their source. */
    private final Map<String, RecordMetadata> input = new HashMap<>();
    private RecordMetadata poison;

    @BeforeEach
    void aRunWithRejectionsFailuresARefusedRowAnEffectRejectionAndADerivedId() throws Exception {
        try (Connection connection = scenario.database().connect()) {
            new PostgresSchema(postgres.tables()).createIfMissing(connection);
        }
        for (String id : List.of("paid-1", "paid-2", "paid-3", "refused-1", "refunded-1")) {
            output(id, in(id));
        }
        in("paid-1"); // re-sent: dedup drops it
        output("refunded-1:refund", input.get("refunded-1"));
        for (String id : List.of("paid-1", "paid-2", "refunded-1", "refunded-1:refund")) {
            row(id, "{\"status\": \"applied\"}");
        }
        row("paid-3", "{\"status\": \"rejected\", \"reason\": \"insufficient funds\"}");
        scenario.database().execute("INSERT INTO " + postgres.rejectsTable() + " (id, payload, sql_state, error)"
                + " VALUES ('refused-1', '{}', '23514', 'check constraint')");
        for (String id : List.of("rejected-1", "rejected-2")) {
            deadLetter(id.getBytes(UTF_8), DeadLetterReason.REJECTED_BY_PROCESSOR, in(id));
        }
        deadLetter("failed-1".getBytes(UTF_8), DeadLetterReason.PROCESSOR_FAILED, in("failed-1"));
        poison = send(scenario.inputTopic, "original-key", "not json",
                new RecordHeader(OnceflowHeaders.MESSAGE_ID, "poison-1".getBytes(UTF_8)));
        deadLetter("original-key".getBytes(UTF_8), DeadLetterReason.MALFORMED_JSON, poison);
    }

    @AfterEach
    void closeProducer() {
        producer.close();
    }

    @Test
    void everyIdHasExactlyOneOutcomeCountedPerOutcome() {
        AuditReport report = scenario.audit();

        assertThat(report.problems()).isEmpty();
        assertThat(report.uniqueIds()).isEqualTo(8);
        assertThat(report.outputIds()).isEqualTo(5);
        assertThat(report.processorDeadLetters())
                .isEqualTo(Map.of("REJECTED_BY_PROCESSOR", 2L, "PROCESSOR_FAILED", 1L));
        assertThat(report.expectedDeadLettersByReason()).isEqualTo(Map.of("MALFORMED_JSON", 1L));
        assertThat(report.derivedIds()).isEqualTo(1);
        assertThat(report.postgresRejectedIds()).isEqualTo(1);
        assertThat(report.effectsRejected()).isEqualTo(1);
        assertThat(report.toText()).contains(
                "  output                    5, e.g. [",
                "    row refused             1 (in the rejects table)\n",
                "    effect rejected         1 (business rejection, in the row's result)\n",
                "  dead letter by processor  3\n",
                "    PROCESSOR_FAILED        1, e.g. [failed-1]\n",
                "  lost (no outcome)         0\n",
                "dead letter by ingest       1 poison records {MALFORMED_JSON=1}\n",
                "  derived ids               1, e.g. [refunded-1:refund (from refunded-1)]\n",
                "VERDICT: clean, every id has exactly one outcome\n");
        assertThat(report.toJson()).contains("\"REJECTED_BY_PROCESSOR\" : {\n        \"count\" : 2,");
        assertThat(report.toText().lines().filter(line -> line.startsWith("  output  ")).findFirst().orElseThrow())
                .as("a line for people shows three examples").matches("  output +5, e\\.g\\. \\[[^,]+, [^,]+, [^,]+\\]");
        assertThat(report.toJson()).as("the JSON counts them all").contains("\"output\" : {\n      \"count\" : 5,");
    }

    @Test
    void anIdWhoseEventTheProcessorReplacedHasItsOutputUnderTheDerivedId() throws Exception {
        output("replaced-1:v2", in("replaced-1"));
        row("replaced-1:v2", "{\"status\": \"applied\"}");

        AuditReport report = scenario.audit();

        assertThat(report.problems()).isEmpty();
        assertThat(report.derivedOnlyIds()).isEqualTo(1);
        assertThat(report.toText()).contains("  output, derived ids only  1, e.g. [replaced-1]\n");
    }

    @Test
    void anIdThatNeverCameOutIsALoss() {
        in("lost-1");

        AuditReport report = scenario.audit();

        assertThat(report.problems()).containsExactly(
                "1 ids lost: no output record and no dead letter, e.g. [lost-1]",
                "1 ids with output missing from the PostgreSQL table, e.g. [lost-1]");
        assertThat(report.toText()).contains("VERDICT: FAILED\n");
    }

    @Test
    void aMissingRowIsALoss() throws Exception {
        scenario.database().execute("DELETE FROM " + postgres.table() + " WHERE id = 'paid-2'");

        assertThat(scenario.audit().problems())
                .containsExactly("1 ids with output missing from the PostgreSQL table, e.g. [paid-2]");
    }

    @Test
    void aSecondOutputIsADuplicate() {
        output("paid-1", input.get("paid-1"));
        output("refunded-1:refund", input.get("refunded-1"));

        List<String> problems = scenario.audit().problems();
        assertThat(problems).hasSize(1);
        assertThat(problems.get(0)).startsWith("2 ids more than once in the output topic, e.g. [")
                .contains("paid-1 x2", "refunded-1:refund x2");
    }

    @Test
    void anOutputOrARowForADeadLetteredIdIsADuplicate() throws Exception {
        output("rejected-1", input.get("rejected-1"));
        row("rejected-2", "{\"status\": \"applied\"}");
        deadLetter("failed-1".getBytes(UTF_8), DeadLetterReason.PROCESSOR_FAILED, input.get("failed-1"));

        assertThat(scenario.audit().problems()).containsExactlyInAnyOrder(
                "1 ids both in the output topic and dead-lettered by the processor, e.g. [rejected-1]",
                "1 ids dead-lettered by the processor more than once, e.g. [failed-1 x2]",
                "1 rows in PostgreSQL of ids the processor dead-lettered, e.g. [rejected-2]");
    }

    @Test
    void anIdDerivedFromNoAcceptedRecordIsUnexpected() {
        output("ghost:refund", poison);

        assertThat(scenario.audit().problems()).containsExactly("1 ids in the output topic that are no accepted"
                + " input id and do not name an accepted input record as their source, e.g. [ghost:refund]");
    }

    /** An input record as a producer of the job's input writes it: the id in the default header. */
    private RecordMetadata in(String id) {
        RecordMetadata metadata = send(scenario.inputTopic, id, "{\"id\": \"" + id + "\"}",
                new RecordHeader(OnceflowHeaders.MESSAGE_ID, id.getBytes(UTF_8)));
        input.putIfAbsent(id, metadata);
        return metadata;
    }

    /** An output record as the job writes it: keyed by id, naming its source record. */
    private void output(String id, RecordMetadata source) {
        List<Header> headers = new ArrayList<>(sourceHeaders(source));
        headers.add(new RecordHeader(OnceflowHeaders.MESSAGE_ID, id.getBytes(UTF_8)));
        send(scenario.outputTopic, id, "{}", headers.toArray(Header[]::new));
    }

    /** A dead letter as the job writes it: the reason and the source record's coordinates. */
    private void deadLetter(byte[] key, DeadLetterReason reason, RecordMetadata source) {
        List<Header> headers = new ArrayList<>(sourceHeaders(source));
        headers.add(new RecordHeader(OnceflowHeaders.DEAD_LETTER_REASON, reason.name().getBytes(UTF_8)));
        headers.add(new RecordHeader(OnceflowHeaders.DEAD_LETTER_ERROR, "why".getBytes(UTF_8)));
        send(scenario.deadLetterTopic, key, headers.toArray(Header[]::new));
    }

    private static List<Header> sourceHeaders(RecordMetadata source) {
        return List.of(new RecordHeader(OnceflowHeaders.SOURCE_TOPIC, source.topic().getBytes(UTF_8)),
                new RecordHeader(OnceflowHeaders.SOURCE_PARTITION, String.valueOf(source.partition()).getBytes(UTF_8)),
                new RecordHeader(OnceflowHeaders.SOURCE_OFFSET, String.valueOf(source.offset()).getBytes(UTF_8)));
    }

    private void row(String id, String result) throws Exception {
        scenario.database().execute("INSERT INTO " + postgres.table() + " (id, payload, result) VALUES ('" + id
                + "', '{}', '" + result + "')");
    }

    private RecordMetadata send(String topic, String key, String value, Header... headers) {
        return send(topic, key.getBytes(UTF_8), value.getBytes(UTF_8), headers);
    }

    private RecordMetadata send(String topic, byte[] key, Header... headers) {
        return send(topic, key, "{}".getBytes(UTF_8), headers);
    }

    private RecordMetadata send(String topic, byte[] key, byte[] value, Header... headers) {
        try {
            return producer.send(new ProducerRecord<>(topic, null, key, value, List.of(headers))).get();
        } catch (Exception e) {
            throw new IllegalStateException("could not write to " + topic, e);
        }
    }
}
