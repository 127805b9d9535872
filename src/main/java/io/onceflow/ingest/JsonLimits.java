package io.onceflow.ingest;

import com.fasterxml.jackson.core.StreamReadConstraints;
import java.io.Serializable;

/**
 * The JSON parser's limits on one record value (the {@code json.max.*} settings). A value beyond one
 * is valid JSON that the job does not read: it is dead-lettered as
 * {@link DeadLetterReason#JSON_LIMIT_EXCEEDED}, naming the limit. The defaults are Jackson's, so that
 * they stay what the parser allowed before they were settings.
 *
 * @param maxNestingDepth the deepest nesting of objects and arrays
 * @param maxNumberLength the most characters of one number
 * @param maxNameLength the most characters of one field name
 * @param maxStringLength the most characters of one string
 */
public record JsonLimits(int maxNestingDepth, int maxNumberLength, int maxNameLength, int maxStringLength)
        implements Serializable {
    /** Jackson's own limits. */
    public static final JsonLimits DEFAULTS = new JsonLimits(StreamReadConstraints.DEFAULT_MAX_DEPTH,
            StreamReadConstraints.DEFAULT_MAX_NUM_LEN, StreamReadConstraints.DEFAULT_MAX_NAME_LEN,
            StreamReadConstraints.DEFAULT_MAX_STRING_LEN);

    /**
     * The setting of the limit a parser error names ({@code getMaxNestingDepth()} and so on, as
     * Jackson's messages say), or all four when it names none of them.
     */
    static String settingNamedBy(String parserMessage) {
        String message = parserMessage == null ? "" : parserMessage;
        if (message.contains("getMaxNestingDepth")) {
            return "json.max.nesting.depth";
        } else if (message.contains("getMaxNumberLength")) {
            return "json.max.number.length";
        } else if (message.contains("getMaxNameLength")) {
            return "json.max.name.length";
        } else if (message.contains("getMaxStringLength")) {
            return "json.max.string.length";
        }
        return "json.max.nesting.depth, json.max.number.length, json.max.name.length or json.max.string.length";
    }

    /** The parser's constraints for these limits. */
    StreamReadConstraints constraints() {
        return StreamReadConstraints.builder()
                .maxNestingDepth(maxNestingDepth)
                .maxNumberLength(maxNumberLength)
                .maxNameLength(maxNameLength)
                .maxStringLength(maxStringLength)
                .build();
    }
}
