package io.onceflow.sink.kafka;

import static java.nio.charset.StandardCharsets.UTF_8;

import io.onceflow.ingest.DeadLetter;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;

/**
 * Writes a dead letter with the original key and value bytes untouched, the original headers,
 * and onceflow's reason, error message and source coordinates, so it can be inspected and replayed.
 */
final class DeadLetterRecordSerializer implements KafkaRecordSerializationSchema<DeadLetter> {
    private static final long serialVersionUID = 1L;

    private final String topic;

    DeadLetterRecordSerializer(String topic) {
        this.topic = topic;
    }

    @Override
    public ProducerRecord<byte[], byte[]> serialize(DeadLetter deadLetter, KafkaSinkContext context, Long timestamp) {
        List<Header> headers = new ArrayList<>(deadLetter.headers.size() + 5);
        for (Map.Entry<String, byte[]> original : deadLetter.headers.entrySet()) {
            headers.add(new RecordHeader(original.getKey(), original.getValue()));
        }
        headers.add(new RecordHeader(OnceflowHeaders.DEAD_LETTER_REASON, deadLetter.reason.getBytes(UTF_8)));
        headers.add(new RecordHeader(OnceflowHeaders.DEAD_LETTER_ERROR, deadLetter.errorMessage.getBytes(UTF_8)));
        headers.add(new RecordHeader(OnceflowHeaders.SOURCE_TOPIC, deadLetter.sourceTopic.getBytes(UTF_8)));
        headers.add(new RecordHeader(OnceflowHeaders.SOURCE_PARTITION, EventRecordSerializer.bytes(deadLetter.sourcePartition)));
        headers.add(new RecordHeader(OnceflowHeaders.SOURCE_OFFSET, EventRecordSerializer.bytes(deadLetter.sourceOffset)));
        return new ProducerRecord<>(topic, null, null, deadLetter.key, deadLetter.value, headers);
    }
}
