package io.onceflow.sink.kafka;

import java.util.Optional;

/**
 * A transactional id of a sink: {@code <sink prefix>-<tag>-<subtask>-<n>}, or without the tag
 * as written before tags; {@code n} is the checkpoint after which the transaction opened, plus one.
 */
record TransactionName(String tag, int subtask, long checkpoint) {
    /** The name, if {@code transactionalId} is exactly one of the sink with {@code sinkPrefix}'s. */
    static Optional<TransactionName> parse(String sinkPrefix, String transactionalId) {
        if (!transactionalId.startsWith(sinkPrefix + "-")) {
            return Optional.empty();
        }
        String[] parts = transactionalId.substring(sinkPrefix.length() + 1).split("-", -1);
        if (parts.length < 2 || parts.length > 3 || (parts.length == 3 && !AttemptTags.isTag(parts[0]))) {
            return Optional.empty();
        }
        try {
            return Optional.of(new TransactionName(parts.length == 3 ? parts[0] : "",
                    Integer.parseInt(parts[parts.length - 2]), Long.parseLong(parts[parts.length - 1])));
        } catch (NumberFormatException e) {
            return Optional.empty();
        }
    }

    /**
     * The tag of a writer attempt's prefix as its state records it ({@code <sink prefix>-<tag>}, or
     * {@code <sink prefix>} before tags: the empty tag); empty for another sink's.
     */
    static Optional<String> tagOf(String sinkPrefix, String attemptPrefix) {
        if (attemptPrefix.equals(sinkPrefix)) {
            return Optional.of("");
        }
        String tag = attemptPrefix.startsWith(sinkPrefix + "-") ? attemptPrefix.substring(sinkPrefix.length() + 1) : "";
        return AttemptTags.isTag(tag) ? Optional.of(tag) : Optional.empty();
    }
}
