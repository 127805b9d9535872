package io.onceflow.tools.generator;

/**
 * What {@link EventGenerator} produces.
 *
 * @param records how many records to send in all (valid first sends, re-sends and poison)
 * @param duplicateRatio the share of records that re-send an earlier valid record unchanged, as a
 *     retrying producer or a redelivering broker would
 * @param poisonRatio the share of records that cannot be processed, cycling through every kind of
 *     {@link io.onceflow.ingest.DeadLetterReason}
 * @param payloadBytes pad valid payloads to about this many bytes (0: no padding)
 * @param maxMessageBytes the job's message.max.bytes: oversized poison is one byte larger
 * @param maxIdLength the job's message.id.max.length: over-long ids are one character longer
 * @param seed the same seed gives the same ids, payloads and order
 */
public record GeneratorSpec(
        long records,
        double duplicateRatio,
        double poisonRatio,
        int payloadBytes,
        int maxMessageBytes,
        int maxIdLength,
        long seed) {

    public GeneratorSpec {
        if (records < 0) {
            throw new IllegalArgumentException("records must be >= 0, got " + records);
        }
        if (duplicateRatio < 0 || poisonRatio < 0 || duplicateRatio + poisonRatio >= 1) {
            throw new IllegalArgumentException("duplicateRatio and poisonRatio must be >= 0 and sum to < 1, got "
                    + duplicateRatio + " and " + poisonRatio);
        }
    }

    /** The demo's mix: 10% duplicates, 1% poison, payloads of about 200 bytes. */
    public static GeneratorSpec demo(long records, int maxMessageBytes, int maxIdLength) {
        return new GeneratorSpec(records, 0.10, 0.01, 200, maxMessageBytes, maxIdLength, 42L);
    }
}
