package io.onceflow.sink.kafka;

import static java.nio.charset.StandardCharsets.UTF_8;

import io.onceflow.api.Event;
import java.util.List;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;

/**
 * Writes an event as key = message id, value = payload, with the id and the source coordinates
 * in headers. Keying by id keeps every record of one id in one partition.
 */
final class EventRecordSerializer implements KafkaRecordSerializationSchema<Event> {
    private static final long serialVersionUID = 1L;

    private final String topic;

    EventRecordSerializer(String topic) {
        this.topic = topic;
    }

    @Override
    public ProducerRecord<byte[], byte[]> serialize(Event event, KafkaSinkContext context, Long timestamp) {
        byte[] id = event.messageId.getBytes(UTF_8);
        List<Header> headers = List.of(
                new RecordHeader(OnceflowHeaders.MESSAGE_ID, id),
                new RecordHeader(OnceflowHeaders.SOURCE_TOPIC, event.sourceTopic.getBytes(UTF_8)),
                new RecordHeader(OnceflowHeaders.SOURCE_PARTITION, bytes(event.sourcePartition)),
                new RecordHeader(OnceflowHeaders.SOURCE_OFFSET, bytes(event.sourceOffset)));
        return new ProducerRecord<>(topic, null, null, id, event.payload, headers);
    }

    static byte[] bytes(long number) {
        return Long.toString(number).getBytes(UTF_8);
    }
}
