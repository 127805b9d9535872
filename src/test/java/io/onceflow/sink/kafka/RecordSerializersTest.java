package io.onceflow.sink.kafka;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.api.Event;
import io.onceflow.ingest.DeadLetter;
import io.onceflow.ingest.DeadLetterReason;
import java.util.HashMap;
import java.util.Map;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.junit.jupiter.api.Test;

class RecordSerializersTest {

    @Test
    void anEventIsKeyedByItsIdWithItsPayloadAndSourceCoordinates() {
        byte[] payload = "{\"id\":\"a-1\",\"amount\":5}".getBytes(UTF_8);
        Event event = new Event("a-1", payload, "payments", 3, 42L, 1_700_000_000_000L, Map.of());

        ProducerRecord<byte[], byte[]> record = new EventRecordSerializer("out").serialize(event, null, null);

        assertThat(record.topic()).isEqualTo("out");
        assertThat(record.partition()).as("partitioned by key hash").isNull();
        assertThat(record.timestamp()).as("the time the job writes it, which the audit's redelivery rule reads,"
                + " never the source record's").isNull();
        assertThat(new String(record.key(), UTF_8)).isEqualTo("a-1");
        assertThat(record.value()).isSameAs(payload);
        assertThat(headers(record)).containsExactlyInAnyOrderEntriesOf(Map.of(
                OnceflowHeaders.MESSAGE_ID, "a-1",
                OnceflowHeaders.SOURCE_TOPIC, "payments",
                OnceflowHeaders.SOURCE_PARTITION, "3",
                OnceflowHeaders.SOURCE_OFFSET, "42"));
    }

    @Test
    void aDeadLetterKeepsTheOriginalBytesAndHeadersAndAddsItsReason() {
        byte[] key = {(byte) 0xff, 0x00};
        byte[] value = "{not json".getBytes(UTF_8);
        Map<String, byte[]> originalHeaders = new HashMap<>();
        originalHeaders.put("trace-id", "t-9".getBytes(UTF_8));
        DeadLetter deadLetter = new DeadLetter(key, value, DeadLetterReason.MALFORMED_JSON, "unexpected end of input",
                "orders", 1, 7L, 0L, originalHeaders);

        ProducerRecord<byte[], byte[]> record = new DeadLetterRecordSerializer("dlq").serialize(deadLetter, null, null);

        assertThat(record.topic()).isEqualTo("dlq");
        assertThat(record.key()).isSameAs(key);
        assertThat(record.value()).isSameAs(value);
        assertThat(headers(record)).containsExactlyInAnyOrderEntriesOf(Map.of(
                "trace-id", "t-9",
                OnceflowHeaders.DEAD_LETTER_REASON, "MALFORMED_JSON",
                OnceflowHeaders.DEAD_LETTER_ERROR, "unexpected end of input",
                OnceflowHeaders.SOURCE_TOPIC, "orders",
                OnceflowHeaders.SOURCE_PARTITION, "1",
                OnceflowHeaders.SOURCE_OFFSET, "7"));
    }

    @Test
    void aTombstoneDeadLetterStaysATombstone() {
        DeadLetter tombstone = new DeadLetter("k".getBytes(UTF_8), null, DeadLetterReason.NULL_VALUE, "null value",
                "orders", 0, 1L, 0L, Map.of());

        ProducerRecord<byte[], byte[]> record = new DeadLetterRecordSerializer("dlq").serialize(tombstone, null, null);

        assertThat(record.value()).isNull();
        assertThat(headers(record)).containsEntry(OnceflowHeaders.DEAD_LETTER_REASON, "NULL_VALUE");
    }

    private static Map<String, String> headers(ProducerRecord<byte[], byte[]> record) {
        Map<String, String> headers = new HashMap<>();
        for (Header header : record.headers()) {
            headers.put(header.key(), new String(header.value(), UTF_8));
        }
        return headers;
    }
}
