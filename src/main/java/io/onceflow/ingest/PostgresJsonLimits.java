package io.onceflow.ingest;

import java.nio.CharBuffer;

/**
 * What valid JSON PostgreSQL's {@code jsonb} still refuses, checked in one pass over the text so
 * that such a record is a dead letter instead of a row that fails the PostgreSQL sink on every
 * replay (see {@link IngestDeserializer}):
 *
 * <ul>
 *   <li>{@code \u0000} and unpaired surrogate escapes in strings ({@code UNSUPPORTED_CHARACTER});
 *   <li>numbers outside {@code numeric}'s range ({@code NUMBER_OUT_OF_RANGE}): at most 131072
 *       digits before the decimal point and 16383 after it, counting what the exponent adds. Found
 *       by trying PostgreSQL 17: {@code 1e131071}, {@code 0.1e131072}, {@code 12e-16383} and
 *       {@code 0e999999} are stored; {@code 1e131072}, {@code 10e131071}, {@code 1.5e-16383} and
 *       {@code 0e-16384} fail with "value overflows numeric format".
 * </ul>
 *
 * <p>Runs on text that already parsed as JSON: a backslash only occurs inside strings, and a
 * number is well-formed.
 */
final class PostgresJsonLimits {
    /** numeric's most decimal digits before the point (32768 base-10000 digit groups). */
    static final int MAX_DIGITS_BEFORE_POINT = 131072;
    /** numeric's largest display scale, NUMERIC_DSCALE_MAX. */
    static final int MAX_DIGITS_AFTER_POINT = 16383;
    /** Exponents beyond this are out of range whatever the digits (Jackson caps a number's length). */
    private static final long EXPONENT_SATURATION = 1_000_000_000L;

    private PostgresJsonLimits() {}

    /** @throws Rejection at the first thing PostgreSQL's jsonb would refuse */
    static void check(CharBuffer text) {
        int start = text.position();
        int end = text.limit();
        boolean inString = false;
        for (int i = start; i < end; i++) {
            char c = text.get(i);
            if (inString) {
                if (c == '"') {
                    inString = false;
                } else if (c == '\\') {
                    i = checkEscape(text, i, start);
                }
            } else if (c == '"') {
                inString = true;
            } else if (c == '-' || (c >= '0' && c <= '9')) {
                i = checkNumber(text, i, start) - 1;
            }
        }
    }

    /**
     * Checks the escape at {@code i} (and the low surrogate escape that must follow a high one).
     *
     * @return the index of the escape's last char
     */
    private static int checkEscape(CharBuffer text, int i, int start) {
        if (text.get(i + 1) != 'u') {
            return i + 1; // skip the escaped char, so "\\\\u0000" (an escaped backslash) is not an escape
        }
        char unit = unicodeEscape(text, i, start);
        if (unit == 0) {
            throw new Rejection(DeadLetterReason.UNSUPPORTED_CHARACTER,
                    "the value escapes U+0000, which PostgreSQL's jsonb cannot store, at char " + (i - start));
        }
        if (Character.isLowSurrogate(unit)) {
            throw unpairedSurrogate(i - start);
        }
        if (!Character.isHighSurrogate(unit)) {
            return i + 5;
        }
        boolean lowFollows = i + 11 < text.limit() && text.get(i + 6) == '\\' && text.get(i + 7) == 'u'
                && Character.isLowSurrogate(unicodeEscape(text, i + 6, start));
        if (!lowFollows) {
            throw unpairedSurrogate(i - start);
        }
        return i + 11;
    }

    private static char unicodeEscape(CharBuffer text, int i, int start) {
        return (char) Integer.parseInt(text, i + 2 - start, i + 6 - start, 16);
    }

    private static Rejection unpairedSurrogate(int at) {
        return new Rejection(DeadLetterReason.UNSUPPORTED_CHARACTER,
                "the value escapes an unpaired surrogate, which PostgreSQL's jsonb cannot store, at char " + at);
    }

    /**
     * Checks the number starting at {@code i} against numeric's range.
     *
     * @return the index after the number
     */
    private static int checkNumber(CharBuffer text, int i, int start) {
        int at = i;
        if (text.get(i) == '-') {
            i++;
        }
        int integerStart = i;
        i = skipDigits(text, i);
        int integerDigits = i - integerStart;
        int fractionDigits = 0;
        int fractionStart = i;
        if (i < text.limit() && text.get(i) == '.') {
            fractionStart = i + 1;
            i = skipDigits(text, fractionStart);
            fractionDigits = i - fractionStart;
        }
        long exponent = 0;
        if (i < text.limit() && (text.get(i) == 'e' || text.get(i) == 'E')) {
            i++;
            boolean negative = text.get(i) == '-';
            if (text.get(i) == '-' || text.get(i) == '+') {
                i++;
            }
            for (; i < text.limit() && isDigit(text.get(i)); i++) {
                exponent = Math.min(EXPONENT_SATURATION, exponent * 10 + (text.get(i) - '0'));
            }
            exponent = negative ? -exponent : exponent;
        }
        long digitsAfterPoint = Math.max(0, fractionDigits - exponent);
        if (digitsAfterPoint > MAX_DIGITS_AFTER_POINT) {
            throw outOfRange(text, at, i, start, digitsAfterPoint + " digits after the decimal point, more than "
                    + MAX_DIGITS_AFTER_POINT);
        }
        int firstSignificant = firstNonZeroDigit(text, integerStart, integerDigits, fractionStart, fractionDigits);
        if (firstSignificant >= 0) { // zero has no digits before the point, whatever its exponent
            long digitsBeforePoint = integerDigits - firstSignificant + exponent;
            if (digitsBeforePoint > MAX_DIGITS_BEFORE_POINT) {
                throw outOfRange(text, at, i, start, digitsBeforePoint + " digits before the decimal point, more than "
                        + MAX_DIGITS_BEFORE_POINT);
            }
        }
        return i;
    }

    /** Position of the first non-zero digit among integer then fraction digits, or -1 if all are zero. */
    private static int firstNonZeroDigit(CharBuffer text, int integerStart, int integerDigits, int fractionStart,
            int fractionDigits) {
        for (int k = 0; k < integerDigits + fractionDigits; k++) {
            char digit = k < integerDigits ? text.get(integerStart + k) : text.get(fractionStart + k - integerDigits);
            if (digit != '0') {
                return k;
            }
        }
        return -1;
    }

    private static int skipDigits(CharBuffer text, int i) {
        while (i < text.limit() && isDigit(text.get(i))) {
            i++;
        }
        return i;
    }

    private static boolean isDigit(char c) {
        return c >= '0' && c <= '9';
    }

    private static Rejection outOfRange(CharBuffer text, int from, int to, int start, String why) {
        return new Rejection(DeadLetterReason.NUMBER_OUT_OF_RANGE, "the value holds a number outside PostgreSQL's"
                + " numeric range (" + why + "), which its jsonb cannot store, at char " + (from - start) + ": "
                + Rejection.quote(text.subSequence(from - start, to - start)));
    }
}
