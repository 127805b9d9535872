package io.onceflow.api;

/**
 * Thrown by an {@link EventProcessor} for a failure that is expected to pass, such as a service it
 * calls being unavailable: the event is retried in place without limit, with the pauses of {@code
 * processor.retry.backoff} (doubling up to {@code processor.retry.backoff.max}), and never
 * dead-lettered. Any other exception is retried {@code processor.max.attempts} times in all, then
 * dead-lettered as {@code PROCESSOR_FAILED}.
 *
 * <p>While an event is retried, its subtask processes nothing else and checkpoints wait: an outage
 * longer than {@code checkpoint.timeout} fails checkpoints, and then the job (a restart replays
 * from the last checkpoint, nothing is lost). Throw it only for what retrying can fix; a subclass
 * is transient too, an exception wrapping it is not.
 */
public class TransientProcessingException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** @param message what failed; logged with each (rate-limited) retry warning */
    public TransientProcessingException(String message) {
        super(message);
    }

    /**
     * @param message what failed; logged with each (rate-limited) retry warning
     * @param cause the underlying failure, e.g. an {@link java.io.IOException}
     */
    public TransientProcessingException(String message, Throwable cause) {
        super(message, cause);
    }
}
