package io.onceflow.ingest;

/**
 * Why a record could not be processed. The code ({@link #name()}) is written to the dead-letter
 * record's {@code onceflow.dlq.reason} header and names a Flink counter, so it is part of the
 * public contract: add new codes, never rename one.
 */
public enum DeadLetterReason {
    /** The value is not valid JSON. */
    MALFORMED_JSON,
    /** The value is valid JSON but not an object. */
    NOT_A_JSON_OBJECT,
    /** The configured id source (header, JSON pointer or key) is absent. */
    MISSING_ID,
    /** The id is present but empty or only white space. */
    EMPTY_ID,
    /**
     * The id is longer than the configured maximum, or, with the PostgreSQL sink, longer in UTF-8
     * than its primary key can index.
     */
    ID_TOO_LONG,
    /** The value is larger than the configured maximum message size. */
    PAYLOAD_TOO_LARGE,
    /** The record has a null value (a tombstone). */
    NULL_VALUE,
    /** The value, or the id, is not valid UTF-8. */
    INVALID_UTF8,
    /** The id found at the JSON pointer is not a string or a number. */
    INVALID_ID_TYPE,
    /**
     * The value escapes U+0000 or an unpaired surrogate ({@code \u0000}, {@code \ud800}), or the id
     * holds U+0000: PostgreSQL's text and jsonb cannot store them, so the row would fail on every retry.
     */
    UNSUPPORTED_CHARACTER,
    /**
     * The value holds a number outside PostgreSQL's numeric range (e.g. {@code 1e999999} or
     * {@code 1e-20000}), which its jsonb cannot store, so the row would fail on every retry.
     */
    NUMBER_OUT_OF_RANGE,
    /**
     * The value is valid JSON beyond a limit of the parser ({@link JsonLimits}, the
     * {@code json.max.*} settings: nesting depth, number length, field name length, string length);
     * the error names the limit.
     */
    JSON_LIMIT_EXCEEDED,
    /**
     * The job's {@code EventProcessor} rejected the event ({@code EventRejectedException}): a
     * business result, recorded and never retried; the error is the processor's reason.
     */
    REJECTED_BY_PROCESSOR,
    /**
     * The job's {@code EventProcessor} threw on every attempt ({@code processor.max.attempts}); the
     * error names the last exception's class and message.
     */
    PROCESSOR_FAILED,
    /**
     * The job's {@code EventProcessor} returned normally and emitted nothing: it dropped the event on
     * purpose. Not a failure: the record says that the event was filtered, so that an audit counts it
     * as an outcome rather than a loss. It has no value (the input record is found by its source
     * coordinates), so it stays small when a processor filters most of a stream.
     */
    FILTERED_BY_PROCESSOR;

    /** Tells whether the job's {@code EventProcessor} gives this reason; every other one is found at ingest. */
    public boolean fromProcessor() {
        return this == REJECTED_BY_PROCESSOR || this == PROCESSOR_FAILED || this == FILTERED_BY_PROCESSOR;
    }
}
