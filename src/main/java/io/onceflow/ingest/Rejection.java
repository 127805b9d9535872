package io.onceflow.ingest;

/**
 * Why a record is dead-lettered. Thrown by the checks of {@link IngestDeserializer} and caught in
 * the same class; it never escapes to Flink. It carries no stack trace: a stream of bad records
 * should cost little more than good ones, and the trace would say nothing the reason does not.
 *
 * <p>The message has its control characters escaped ({@link ErrorText}), whatever their source
 * (quoted input, Jackson's messages).
 */
final class Rejection extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** The most characters of input a message quotes, so that dead letters stay small. */
    static final int MAX_QUOTED_CHARS = 100;

    final DeadLetterReason reason;

    Rejection(DeadLetterReason reason, String message) {
        super(ErrorText.escapeControlChars(message), null, false, false);
        this.reason = reason;
    }

    /**
     * Quotes at most {@link #MAX_QUOTED_CHARS} characters of input for an error message, in single
     * quotes, noting the full length if it was cut.
     */
    static String quote(CharSequence input) {
        return "'" + ErrorText.cut(input, MAX_QUOTED_CHARS, "'");
    }
}
