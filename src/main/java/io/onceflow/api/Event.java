package io.onceflow.api;

import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;

/**
 * An accepted input message: its id, its payload and where it came from.
 *
 * <p>A Flink POJO (public no-arg constructor, public fields) so that Flink serialises it with its
 * own {@code PojoSerializer}, never with Kryo. {@code headers} keeps the last value of each header
 * key of the source record.
 */
public class Event {
    /** The message id, found where the {@code message.id.source} setting says; never null or empty. */
    public String messageId;
    /** The record value as received: UTF-8 bytes. */
    public byte[] payload;
    public String sourceTopic;
    public int sourcePartition;
    public long sourceOffset;
    /** The Kafka record timestamp (producer or log-append time), in epoch milliseconds. */
    public long sourceTimestamp;
    public Map<String, byte[]> headers = new HashMap<>();
    /**
     * The source record's key as received, or null when it had none. Not written to the output (whose key
     * is the message id): it is the key of this event's dead letter, as of every dead letter, so that a
     * dead letter is its source record as received and can be replayed to the same partition.
     */
    public byte[] sourceKey;

    public Event() {}

    public Event(
            String messageId,
            byte[] payload,
            String sourceTopic,
            int sourcePartition,
            long sourceOffset,
            long sourceTimestamp,
            Map<String, byte[]> headers) {
        this.messageId = messageId;
        this.payload = payload;
        this.sourceTopic = sourceTopic;
        this.sourcePartition = sourcePartition;
        this.sourceOffset = sourceOffset;
        this.sourceTimestamp = sourceTimestamp;
        this.headers = headers;
    }

    @Override
    public boolean equals(Object o) {
        if (this == o) {
            return true;
        }
        if (!(o instanceof Event)) {
            return false;
        }
        Event other = (Event) o;
        return sourcePartition == other.sourcePartition
                && sourceOffset == other.sourceOffset
                && sourceTimestamp == other.sourceTimestamp
                && Objects.equals(messageId, other.messageId)
                && Arrays.equals(payload, other.payload)
                && Objects.equals(sourceTopic, other.sourceTopic);
    }

    @Override
    public int hashCode() {
        return Objects.hash(messageId, sourceTopic, sourcePartition, sourceOffset);
    }

    @Override
    public String toString() {
        return "Event{id=" + messageId + ", source=" + sourceTopic + "-" + sourcePartition + "@" + sourceOffset
                + ", payloadBytes=" + (payload == null ? 0 : payload.length) + "}";
    }
}
