package io.onceflow.sink.postgres.internal;

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import org.apache.flink.annotation.Internal;

/**
 * Internal. The source partitions ({@code topic/partition}) whose first queued effect keeps failing
 * alone, each with a backoff of its own: an {@link EffectWorker} leaves them out of its batches until their time comes, so one
 * effect that is retried (a timeout, a missing privilege for one payload) holds up only its own
 * partition, whose order must be kept, and not the effects of the others.
 */
@Internal
final class PartitionsSetAside {
    private final Duration first;
    private final Duration longest;
    /** Partition to when it may be taken again (System.nanoTime()). */
    private final Map<String, Long> until = new HashMap<>();
    /** Partition to its next wait in ms, doubled at each failure. */
    private final Map<String, Long> backoff = new HashMap<>();

    PartitionsSetAside(Duration first, Duration longest) {
        this.first = first;
        this.longest = longest;
    }

    /** Sets {@code partition} aside after its first effect failed alone; returns how long, in ms. */
    long failed(String partition) {
        long wait = backoff.merge(partition, first.toMillis(), (before, ignored) -> Math.min(2 * before, longest.toMillis()));
        until.put(partition, System.nanoTime() + Duration.ofMillis(wait).toNanos());
        return wait;
    }

    /** {@code partition}'s first effect went through: its backoff starts over. */
    void succeeded(String partition) {
        backoff.remove(partition);
    }

    /** The partitions still set aside now. */
    Set<String> now() {
        long now = System.nanoTime();
        until.values().removeIf(time -> now - time > 0);
        return until.keySet();
    }
}
