package io.onceflow.sink.postgres.internal;

import org.apache.flink.annotation.Internal;

/**
 * Internal. A writer attempt found that a newer run or a newer attempt owns what it was about to
 * touch: it is a zombie and must stop without writing (see {@link WriterClaim}).
 */
@Internal
public final class StaleWriterException extends IllegalStateException {
    private static final long serialVersionUID = 1L;

    public StaleWriterException(String message) {
        super(message);
    }
}
