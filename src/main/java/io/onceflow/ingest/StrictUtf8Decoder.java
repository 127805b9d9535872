package io.onceflow.ingest;

import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CoderResult;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;

/**
 * Decodes UTF-8 strictly: malformed input (including overlong forms, encoded surrogates and a
 * truncated last sequence) is rejected, never replaced with U+FFFD as {@code new String} would.
 *
 * <p>Decodes into one char buffer reused across calls, so that checking a record value allocates
 * nothing once the buffer has grown to the largest value seen. Not thread-safe.
 */
final class StrictUtf8Decoder {
    private static final int INITIAL_CAPACITY = 4096;
    private static final HexFormat HEX = HexFormat.ofDelimiter(" ");

    private final CharsetDecoder decoder = StandardCharsets.UTF_8
            .newDecoder()
            .onMalformedInput(CodingErrorAction.REPORT)
            .onUnmappableCharacter(CodingErrorAction.REPORT);
    private CharBuffer chars = CharBuffer.allocate(INITIAL_CAPACITY);

    /**
     * Decodes {@code bytes}.
     *
     * @param subject what the bytes are, to start the error message, e.g. "the value"
     * @return the characters, in a heap buffer from its position to its limit; valid only until
     *     the next call
     * @throws Rejection with {@link DeadLetterReason#INVALID_UTF8} if the bytes are not valid UTF-8
     */
    CharBuffer decode(byte[] bytes, String subject) {
        // UTF-8 never yields more chars than bytes, so the buffer holds the whole result and
        // decoding ends in underflow (all input read) or an error, never in overflow.
        if (chars.capacity() < bytes.length) {
            chars = CharBuffer.allocate(bytes.length);
        }
        chars.clear();
        ByteBuffer input = ByteBuffer.wrap(bytes);
        decoder.reset();
        CoderResult result = decoder.decode(input, chars, true);
        if (result.isUnderflow()) {
            result = decoder.flush(chars);
        }
        if (result.isError()) {
            int offset = input.position();
            int end = Math.min(bytes.length, offset + result.length());
            throw new Rejection(
                    DeadLetterReason.INVALID_UTF8,
                    subject + " is not valid UTF-8: malformed sequence at byte offset " + offset + " (hex "
                            + HEX.formatHex(bytes, offset, end) + ")");
        }
        return chars.flip();
    }
}
