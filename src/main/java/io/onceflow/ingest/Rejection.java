package io.onceflow.ingest;

/**
 * Why a record is dead-lettered. Thrown by the checks of {@link IngestDeserializer} and caught in
 * the same class; it never escapes to Flink. It carries no stack trace: a stream of bad records
 * should cost little more than good ones, and the trace would say nothing the reason does not.
 *
 * <p>The message has its control characters escaped Java-style, whatever their source (quoted
 * input, Jackson's messages): it ends up in Kafka headers and PostgreSQL text, which rejects NUL.
 */
final class Rejection extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** The most characters of input a message quotes, so that dead letters stay small. */
    static final int MAX_QUOTED_CHARS = 100;

    final DeadLetterReason reason;

    Rejection(DeadLetterReason reason, String message) {
        super(escapeControlChars(message), null, false, false);
        this.reason = reason;
    }

    /**
     * Quotes at most {@link #MAX_QUOTED_CHARS} characters of input for an error message, in single
     * quotes, noting the full length if it was cut.
     */
    static String quote(CharSequence input) {
        int end = Math.min(input.length(), MAX_QUOTED_CHARS);
        if (end < input.length() && Character.isHighSurrogate(input.charAt(end - 1))) {
            end--; // do not split a surrogate pair
        }
        String quoted = "'" + input.subSequence(0, end) + "'";
        return end == input.length() ? quoted : quoted + "... (" + input.length() + " chars in all)";
    }

    private static String escapeControlChars(String message) {
        StringBuilder escaped = new StringBuilder(message.length());
        for (int i = 0; i < message.length(); i++) {
            char c = message.charAt(i);
            if (Character.isISOControl(c)) {
                escaped.append(String.format("\\u%04x", (int) c));
            } else {
                escaped.append(c);
            }
        }
        return escaped.toString();
    }
}
