package io.onceflow.config;

import java.io.Serializable;
import java.time.Duration;
import java.util.Objects;

/**
 * How the job retries an event whose {@code EventProcessor} throws ({@code processor.*}
 * settings): up to {@code maxAttempts} attempts in all, pausing {@code backoff} before the first
 * retry and twice as long before each further one, never longer than {@code maxBackoff}.
 *
 * @param maxAttempts at least 1 (1: no retry)
 * @param backoff positive
 * @param maxBackoff at least {@code backoff}
 */
public record ProcessorRetries(int maxAttempts, Duration backoff, Duration maxBackoff) implements Serializable {
    public ProcessorRetries {
        Objects.requireNonNull(backoff, "backoff");
        Objects.requireNonNull(maxBackoff, "maxBackoff");
        if (maxAttempts < 1 || backoff.isNegative() || backoff.isZero() || maxBackoff.compareTo(backoff) < 0) {
            throw new IllegalArgumentException("need maxAttempts >= 1 and 0 < backoff <= maxBackoff, not "
                    + maxAttempts + ", " + backoff + ", " + maxBackoff);
        }
    }

    /**
     * Returns the pause before a retry.
     *
     * @param retry 1 for the first retry (the second attempt)
     * @return {@code backoff} doubled {@code retry - 1} times, at most {@code maxBackoff}
     */
    public Duration pauseBeforeRetry(int retry) {
        Duration pause = backoff;
        for (int doubled = 1; doubled < retry && pause.compareTo(maxBackoff) < 0; doubled++) {
            pause = pause.multipliedBy(2);
        }
        return pause.compareTo(maxBackoff) < 0 ? pause : maxBackoff;
    }

    /**
     * Returns the pauses of an event that fails every attempt, added up: how long such an event
     * holds up the checkpoint behind it.
     *
     * @return zero when {@code maxAttempts} is 1
     */
    public Duration pausesOfAFailingEvent() {
        Duration total = Duration.ZERO;
        for (int retry = 1; retry < maxAttempts; retry++) {
            total = total.plus(pauseBeforeRetry(retry));
        }
        return total;
    }
}
