package io.onceflow.ingest;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.apache.flink.api.common.functions.util.ListCollector;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.record.TimestampType;

/** Builds Kafka records with fixed source coordinates and runs them through a deserializer. */
final class TestRecords {
    static final String TOPIC = "payments";
    static final int PARTITION = 3;
    static final long OFFSET = 4711L;
    static final long TIMESTAMP = 1_700_000_000_123L;

    private TestRecords() {}

    static byte[] utf8(String text) {
        return text.getBytes(UTF_8);
    }

    static ConsumerRecord<byte[], byte[]> record(byte[] key, byte[] value, RecordHeaders headers) {
        return new ConsumerRecord<>(
                TOPIC,
                PARTITION,
                OFFSET,
                TIMESTAMP,
                TimestampType.CREATE_TIME,
                key == null ? -1 : key.length,
                value == null ? -1 : value.length,
                key,
                value,
                headers,
                Optional.empty());
    }

    static ConsumerRecord<byte[], byte[]> record(byte[] key, byte[] value) {
        return record(key, value, new RecordHeaders());
    }

    /** A record with no key whose value is the given text. */
    static ConsumerRecord<byte[], byte[]> value(String json) {
        return record(null, utf8(json));
    }

    /** Deserializes one record, checking that it yields exactly one result. */
    static IngestResult ingest(IngestDeserializer deserializer, ConsumerRecord<byte[], byte[]> record) {
        List<IngestResult> results = new ArrayList<>();
        deserializer.deserialize(record, new ListCollector<>(results));
        assertThat(results).hasSize(1);
        IngestResult result = results.get(0);
        assertThat(result.event == null)
                .as("exactly one of event and dead letter")
                .isNotEqualTo(result.deadLetter == null);
        return result;
    }
}
