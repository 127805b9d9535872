package io.onceflow.ingest;

import io.onceflow.api.Event;
import java.util.HashMap;
import java.util.Map;

/**
 * A record that could not be processed, with the original key and value bytes kept as received
 * and the reason. A Flink POJO, like {@link Event}.
 */
public class DeadLetter {
    public byte[] key;
    public byte[] value;
    /** A {@link DeadLetterReason} name. */
    public String reason;
    /** A human-readable explanation; never contains secrets, may quote a bounded part of the input. */
    public String errorMessage;
    public String sourceTopic;
    public int sourcePartition;
    public long sourceOffset;
    public long sourceTimestamp;
    public Map<String, byte[]> headers = new HashMap<>();

    public DeadLetter() {}

    public DeadLetter(
            byte[] key,
            byte[] value,
            DeadLetterReason reason,
            String errorMessage,
            String sourceTopic,
            int sourcePartition,
            long sourceOffset,
            long sourceTimestamp,
            Map<String, byte[]> headers) {
        this.key = key;
        this.value = value;
        this.reason = reason.name();
        this.errorMessage = errorMessage;
        this.sourceTopic = sourceTopic;
        this.sourcePartition = sourcePartition;
        this.sourceOffset = sourceOffset;
        this.sourceTimestamp = sourceTimestamp;
        this.headers = headers;
    }

    @Override
    public String toString() {
        return "DeadLetter{reason=" + reason + ", source=" + sourceTopic + "-" + sourcePartition + "@" + sourceOffset
                + ", error=" + errorMessage + "}";
    }
}
