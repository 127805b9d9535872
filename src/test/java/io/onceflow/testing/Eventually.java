package io.onceflow.testing;

import java.time.Duration;
import java.util.Optional;

/**
 * The one way tests wait for something that happens elsewhere (another thread, process or server):
 * poll a condition until it holds or a timeout passes. The condition is asked first, then the clock,
 * then the poll interval is slept, so a condition that already holds costs no wait, and one that never
 * holds is asked until the timeout has passed.
 *
 * <p>{@link #await} fails the test with an {@link AssertionError} carrying the description; a wait
 * whose timeout is not a failure in itself (the caller decides, or throws its own exception) uses
 * {@link #holdsWithin} or {@link #valueWithin}. Exceptions of the condition propagate at once: a
 * condition that should ask again after an error catches it itself.
 */
public final class Eventually {
    /** The poll interval of the variants without one: cheap conditions on this JVM or a local server. */
    public static final Duration DEFAULT_POLL_INTERVAL = Duration.ofMillis(50);

    private Eventually() {}

    /** Something to wait for. */
    @FunctionalInterface
    public interface Condition<E extends Exception> {
        boolean holds() throws E;
    }

    /** Something to wait for that has a value once it is there: empty until then. */
    @FunctionalInterface
    public interface Probe<T, E extends Exception> {
        Optional<T> poll() throws E;
    }

    /** Waits until {@code condition} holds, polling every {@link #DEFAULT_POLL_INTERVAL}; fails after {@code timeout}. */
    public static <E extends Exception> void await(String description, Duration timeout, Condition<E> condition)
            throws E, InterruptedException {
        await(description, timeout, DEFAULT_POLL_INTERVAL, condition);
    }

    /** Waits until {@code condition} holds, polling every {@code pollInterval}; fails with {@code description} after {@code timeout}. */
    public static <E extends Exception> void await(String description, Duration timeout, Duration pollInterval,
            Condition<E> condition) throws E, InterruptedException {
        if (!holdsWithin(timeout, pollInterval, condition)) {
            throw new AssertionError(description);
        }
    }

    /** Waits until {@code probe} has a value and returns it, polling every {@code pollInterval}; fails with {@code description} after {@code timeout}. */
    public static <T, E extends Exception> T awaitValue(String description, Duration timeout, Duration pollInterval,
            Probe<T, E> probe) throws E, InterruptedException {
        return valueWithin(timeout, pollInterval, probe).orElseThrow(() -> new AssertionError(description));
    }

    /** Whether {@code condition} holds within {@code timeout}, polling every {@code pollInterval}. */
    public static <E extends Exception> boolean holdsWithin(Duration timeout, Duration pollInterval,
            Condition<E> condition) throws E, InterruptedException {
        return valueWithin(timeout, pollInterval, () -> condition.holds() ? Optional.of(true) : Optional.empty())
                .isPresent();
    }

    /** The value of {@code probe} once it has one, polling every {@code pollInterval}; empty if it has none within {@code timeout}. */
    public static <T, E extends Exception> Optional<T> valueWithin(Duration timeout, Duration pollInterval,
            Probe<T, E> probe) throws E, InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            Optional<T> value = probe.poll();
            if (value.isPresent()) {
                return value;
            }
            if (System.nanoTime() - deadline > 0) {
                return Optional.empty();
            }
            Thread.sleep(pollInterval.toMillis());
        }
    }
}
