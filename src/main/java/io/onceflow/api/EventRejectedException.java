package io.onceflow.api;

import java.util.Objects;

/**
 * Thrown by an {@link EventProcessor} to reject the event it is given: a business result, not a
 * failure. The event goes to the dead-letter topic with reason {@code REJECTED_BY_PROCESSOR} and
 * this exception's message as its error, exactly once, and is never retried; whatever the processor
 * emitted for the event before is discarded.
 *
 * <pre>{@code
 * if (amount.signum() < 0) {
 *     throw new EventRejectedException("negative amount " + amount);
 * }
 * }</pre>
 *
 * <p>It carries no stack trace (a rejection is expected, and a stream of them should cost little).
 * Only an exception thrown as such counts: one wrapped in another exception is a failure.
 */
public class EventRejectedException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /**
     * @param reason why the event is rejected, for whoever reads the dead-letter topic; written to
     *     the {@code onceflow.dlq.error} header, cut to a bounded length, with control characters
     *     escaped. Do not put secrets in it.
     */
    public EventRejectedException(String reason) {
        super(Objects.requireNonNull(reason, "reason"), null, false, false);
    }
}
