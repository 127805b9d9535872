package io.onceflow.sink.kafka;

/** Names of the headers onceflow writes on output and dead-letter records. Part of the public contract. */
public final class OnceflowHeaders {
    /** The message id, on output records (same name as the default input id header, so jobs chain). */
    public static final String MESSAGE_ID = "message-id";
    public static final String SOURCE_TOPIC = "onceflow.source.topic";
    public static final String SOURCE_PARTITION = "onceflow.source.partition";
    public static final String SOURCE_OFFSET = "onceflow.source.offset";
    /** A {@link io.onceflow.ingest.DeadLetterReason} code, on dead-letter records. */
    public static final String DEAD_LETTER_REASON = "onceflow.dlq.reason";
    public static final String DEAD_LETTER_ERROR = "onceflow.dlq.error";

    private OnceflowHeaders() {}
}
