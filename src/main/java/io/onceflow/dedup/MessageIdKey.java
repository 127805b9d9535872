package io.onceflow.dedup;

import io.onceflow.api.Event;
import java.util.Objects;
import java.util.UUID;
import org.apache.flink.api.java.functions.KeySelector;

/**
 * The key under which dedup remembers a message id: the id's 16 bytes when it is a UUID in
 * canonical form (36 characters, lower-case hex, hyphens at 8, 13, 18 and 23: exactly what
 * {@link UUID#toString()} prints), else the id string itself.
 *
 * <p>Lossless both ways, so two distinct ids never share a key: a canonical UUID string has exactly
 * one 16-byte form and {@link #messageId()} prints it back unchanged, and every other id (upper
 * case, braces, missing zero padding...) stays a string, which is a different kind of key from any
 * UUID key. A hash of the id would be smaller still, but a collision would silently drop a distinct
 * message.
 *
 * <p>Why: a UUID id costs 16 bytes in the checkpointed state instead of 37 (a length byte and 36
 * characters), which is most of each entry's size. See {@link MessageIdKeySerializer} for the
 * serialised form, part of the savepoint format.
 */
public final class MessageIdKey {
    private static final int CANONICAL_UUID_LENGTH = 36;

    private final long uuidHigh;
    private final long uuidLow;
    /** The id when it is not a canonical UUID; null when it is one. */
    private final String text;

    private MessageIdKey(long uuidHigh, long uuidLow, String text) {
        this.uuidHigh = uuidHigh;
        this.uuidLow = uuidLow;
        this.text = text;
    }

    /** The key of {@code messageId}: its 16 bytes if it is a canonical UUID string, else the string. */
    public static MessageIdKey of(String messageId) {
        Objects.requireNonNull(messageId, "messageId");
        if (messageId.length() == CANONICAL_UUID_LENGTH
                && messageId.charAt(8) == '-' && messageId.charAt(13) == '-'
                && messageId.charAt(18) == '-' && messageId.charAt(23) == '-') {
            long high = parseHex(messageId, 0, 8);
            long mid = parseHex(messageId, 9, 13);
            long highLow = parseHex(messageId, 14, 18);
            long lowHigh = parseHex(messageId, 19, 23);
            long low = parseHex(messageId, 24, 36);
            if (high >= 0 && mid >= 0 && highLow >= 0 && lowHigh >= 0 && low >= 0) {
                return new MessageIdKey((high << 32) | (mid << 16) | highLow, (lowHigh << 48) | low, null);
            }
        }
        return new MessageIdKey(0, 0, messageId);
    }

    static MessageIdKey ofUuid(long uuidHigh, long uuidLow) {
        return new MessageIdKey(uuidHigh, uuidLow, null);
    }

    static MessageIdKey ofText(String text) {
        return new MessageIdKey(0, 0, text);
    }

    /**
     * The value of {@code s[from, to)} as lower-case hex (at most 15 digits), or -1 if any character
     * is not {@code [0-9a-f]}: upper case would not round-trip through {@link UUID#toString()}.
     */
    private static long parseHex(String s, int from, int to) {
        long value = 0;
        for (int i = from; i < to; i++) {
            char c = s.charAt(i);
            int digit;
            if (c >= '0' && c <= '9') {
                digit = c - '0';
            } else if (c >= 'a' && c <= 'f') {
                digit = c - 'a' + 10;
            } else {
                return -1;
            }
            value = (value << 4) | digit;
        }
        return value;
    }

    /** True if the key holds the 16 bytes of a UUID, false if it holds the id string. */
    public boolean isUuid() {
        return text == null;
    }

    long uuidHigh() {
        return uuidHigh;
    }

    long uuidLow() {
        return uuidLow;
    }

    String text() {
        return text;
    }

    /** The message id this key was made from, character for character. */
    public String messageId() {
        return isUuid() ? new UUID(uuidHigh, uuidLow).toString() : text;
    }

    @Override
    public boolean equals(Object o) {
        if (this == o) {
            return true;
        }
        if (!(o instanceof MessageIdKey)) {
            return false;
        }
        MessageIdKey other = (MessageIdKey) o;
        return isUuid()
                ? other.isUuid() && uuidHigh == other.uuidHigh && uuidLow == other.uuidLow
                : text.equals(other.text);
    }

    /** Deterministic across JVMs (never identity-based): Flink derives the key group from it. */
    @Override
    public int hashCode() {
        return isUuid() ? Long.hashCode(uuidHigh) * 31 + Long.hashCode(uuidLow) : text.hashCode();
    }

    @Override
    public String toString() {
        return messageId();
    }

    /** Keys events by {@link #of}{@code (event.messageId)}; a named class so its serialised form stays stable. */
    public static final class Selector implements KeySelector<Event, MessageIdKey> {
        private static final long serialVersionUID = 1L;

        @Override
        public MessageIdKey getKey(Event event) {
            return of(event.messageId);
        }
    }
}
