package io.onceflow.sink.postgres.internal;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;

/**
 * Internal. An {@link EffectWorker}'s view of its queue, for its gauges: how many effects wait to
 * be called, how many failed and wait for an operator, how many are stale
 * ({@link PendingEffectsTable#backlogQuery}), and the age of the oldest; read at most every
 * {@link #REFRESH} unless asked for now. Written by the worker's thread, read by the metrics'.
 */
final class EffectBacklog {
    static final Duration REFRESH = Duration.ofSeconds(5);

    private final String backlogQuery;
    private volatile long queued;
    private volatile long awaitingRedrive;
    private volatile long stale;
    /** The oldest queued effect's age in ms at the last read, and when that was (nanoTime). */
    private volatile long oldestQueuedMillisAtRead;
    private volatile long readNanos = System.nanoTime();

    EffectBacklog(PendingEffectsTable queue) {
        this.backlogQuery = queue.backlogQuery();
    }

    /** Whether the last read is older than {@link #REFRESH}. */
    boolean due() {
        return System.nanoTime() - readNanos >= REFRESH.toNanos();
    }

    /** Reads the queue. */
    void read(Connection session) throws SQLException {
        try (PreparedStatement query = session.prepareStatement(backlogQuery);
                ResultSet backlog = query.executeQuery()) {
            backlog.next();
            long now = System.nanoTime();
            oldestQueuedMillisAtRead = Math.round(backlog.getDouble(2) * 1000);
            readNanos = now;
            queued = backlog.getLong(1);
            awaitingRedrive = backlog.getLong(3);
            stale = backlog.getLong(4);
        }
    }

    /** Effects waiting to be called, at the last read. */
    long queued() {
        return queued;
    }

    /** Failed effects waiting for an operator, at the last read. */
    long awaitingRedrive() {
        return awaitingRedrive;
    }

    /** Queued effects whose events row is gone, which no worker can take, at the last read. */
    long stale() {
        return stale;
    }

    /**
     * The oldest queued effect's age: its age at the last read plus the time since. While a batch
     * is blocked, or the worker cannot read the queue (the database is down), the figure keeps
     * growing from what it last saw, so that an alert on it fires: an effect the worker saw queued is
     * assumed still queued until a read says otherwise.
     */
    long oldestQueuedSeconds() {
        if (queued == 0) {
            return 0;
        }
        return (oldestQueuedMillisAtRead + (System.nanoTime() - readNanos) / 1_000_000) / 1000;
    }
}
