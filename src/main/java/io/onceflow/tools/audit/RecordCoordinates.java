package io.onceflow.tools.audit;

import java.util.Optional;

/**
 * Where a Kafka record is, written {@code topic/partition/offset} as the audit keys records by: the
 * input record's own, or the source an output or dead-letter record names in its headers.
 */
record RecordCoordinates(String topic, int partition, long offset) {
    /** The coordinates {@code text} writes; empty when it writes none (a record without source headers). */
    static Optional<RecordCoordinates> parse(String text) {
        int offsetAt = text.lastIndexOf('/');
        int partitionAt = offsetAt < 1 ? -1 : text.lastIndexOf('/', offsetAt - 1);
        if (partitionAt < 1) {
            return Optional.empty();
        }
        try {
            return Optional.of(new RecordCoordinates(text.substring(0, partitionAt),
                    Integer.parseInt(text.substring(partitionAt + 1, offsetAt)),
                    Long.parseLong(text.substring(offsetAt + 1))));
        } catch (NumberFormatException notCoordinates) {
            return Optional.empty();
        }
    }

    @Override
    public String toString() {
        return topic + "/" + partition + "/" + offset;
    }
}
