package io.onceflow.testkit;

import static java.nio.charset.StandardCharsets.UTF_8;

import io.onceflow.sink.kafka.OnceflowHeaders;
import java.util.Map;
import java.util.Objects;

/**
 * One input record of a {@link JobUnderTest} run, and the label its outcomes are looked up by
 * ({@link Outcomes#outputOf}, {@link Outcomes#deadLetterOf}, {@link Outcomes#rowOf}).
 *
 * <p>{@link #of} makes a record as a producer of the job's default input would: the id in the
 * {@code message-id} header and as the key, the JSON as the value. {@link #raw} makes anything else
 * (poison, no id, a tombstone), labelled so that the test can find its dead letter. Sending the same
 * record twice is a redelivery: the job must still show one outcome for it.
 *
 * @param label what the test calls the record: its message id for {@link #of}
 * @param key the Kafka record key, or null
 * @param value the Kafka record value, or null for a tombstone
 * @param headers the Kafka record headers
 */
public record TestRecord(String label, byte[] key, byte[] value, Map<String, byte[]> headers) {
    public TestRecord {
        Objects.requireNonNull(label, "label");
        headers = Map.copyOf(headers);
    }

    /**
     * A record with message id {@code id} (in the {@code message-id} header, where the job looks by
     * default, and as the key) and {@code json} as its value.
     */
    public static TestRecord of(String id, String json) {
        byte[] idBytes = id.getBytes(UTF_8);
        return new TestRecord(id, idBytes, json == null ? null : json.getBytes(UTF_8),
                Map.of(OnceflowHeaders.MESSAGE_ID, idBytes));
    }

    /** A record exactly as given, found in the outcomes by {@code label}: e.g. bytes that are not JSON. */
    public static TestRecord raw(String label, byte[] key, byte[] value, Map<String, byte[]> headers) {
        return new TestRecord(label, key, value, headers);
    }
}
