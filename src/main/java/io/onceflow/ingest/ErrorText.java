package io.onceflow.ingest;

import org.apache.flink.annotation.Internal;

/**
 * Makes text fit for a dead letter's error message, which ends up in a Kafka header and in
 * PostgreSQL text (which refuses NUL): cut to a bounded length and with control characters escaped
 * Java-style ({@code \u000a}), whatever its source (quoted input, a library's or a user's exception
 * message).
 */
@Internal
public final class ErrorText {
    private ErrorText() {}

    /**
     * At most {@code maxChars} characters of {@code text} (one less rather than split a surrogate
     * pair), then {@code closing} (e.g. a closing quote), then, if it was cut, a note of its full
     * length; control characters not yet escaped.
     */
    static String cut(CharSequence text, int maxChars, String closing) {
        if (text.length() <= maxChars) {
            return text + closing;
        }
        int end = maxChars;
        if (end > 0 && Character.isHighSurrogate(text.charAt(end - 1))) {
            end--;
        }
        return text.subSequence(0, end) + closing + "... (" + text.length() + " chars in all)";
    }

    /**
     * {@code message} with its control characters escaped, cut to at most {@code maxChars}
     * characters before escaping (so the result stays within 6 times that).
     */
    public static String bounded(String message, int maxChars) {
        return escapeControlChars(cut(message, maxChars, ""));
    }

    static String escapeControlChars(String message) {
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
