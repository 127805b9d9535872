package io.onceflow.sink.postgres.internal;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;

/**
 * Internal. An {@link EffectWorker}'s view of its queue, for its gauges: how many effects wait to
 * be called, how many failed and wait for an operator, how many are stale (their events row is gone:
 * {@link PendingEffectsTable#staleQuery}), and the age of the oldest that waits; read at most every
 * {@link #REFRESH} unless asked for now. Written by the worker's thread, read by the metrics'.
 *
 * <p>Stale effects are counted only while the oldest queued effect has waited longer than
 * {@link #STALE_SUSPECT}, at most every {@link #STALE_REFRESH}: that count probes the events table
 * once per queued effect, and a backlog being caught up can be hundreds of thousands.
 */
final class EffectBacklog {
    static final Duration REFRESH = Duration.ofSeconds(5);
    static final Duration STALE_SUSPECT = Duration.ofMinutes(1);
    static final Duration STALE_REFRESH = Duration.ofMinutes(1);

    private final String backlogQuery;
    private final String staleQuery;
    /** Queued to be called, stale ones included. */
    private volatile long queuedWithStale;
    private volatile long awaitingRedrive;
    private volatile long stale;
    /** The oldest waiting effect's age in ms at the last read, and when that was (nanoTime). */
    private volatile long oldestQueuedMillisAtRead;
    private volatile long readNanos = System.nanoTime();
    private long staleReadNanos = System.nanoTime() - STALE_REFRESH.toNanos();
    /** The oldest waiting effect's age in ms when the stale effects were last counted. */
    private long staleOldestMillis;

    EffectBacklog(PendingEffectsTable queue) {
        this.backlogQuery = queue.backlogQuery();
        this.staleQuery = queue.staleQuery();
    }

    /** Whether the last read is older than {@link #REFRESH}. */
    boolean due() {
        return System.nanoTime() - readNanos >= REFRESH.toNanos();
    }

    /** Reads the queue; counts the stale effects again if due. */
    void read(Connection session) throws SQLException {
        long oldestMillis;
        try (PreparedStatement query = session.prepareStatement(backlogQuery);
                ResultSet backlog = query.executeQuery()) {
            backlog.next();
            queuedWithStale = backlog.getLong(1);
            oldestMillis = Math.round(backlog.getDouble(2) * 1000);
            awaitingRedrive = backlog.getLong(3);
        }
        long now = System.nanoTime();
        if (oldestMillis <= STALE_SUSPECT.toMillis()) {
            stale = 0; // nothing has waited long: a stale effect is counted as waiting for its first minute
        } else if (now - staleReadNanos >= STALE_REFRESH.toNanos()) {
            try (PreparedStatement query = session.prepareStatement(staleQuery);
                    ResultSet counted = query.executeQuery()) {
                counted.next();
                stale = counted.getLong(1);
                staleOldestMillis = Math.round(counted.getDouble(2) * 1000);
            }
            staleReadNanos = now;
        }
        // with stale effects, the oldest that waits is the one their count found, aged since
        oldestQueuedMillisAtRead = stale == 0 ? oldestMillis : staleOldestMillis + (now - staleReadNanos) / 1_000_000;
        readNanos = now;
    }

    /** Effects waiting to be called, at the last read. */
    long queued() {
        return Math.max(0, queuedWithStale - stale);
    }

    /** Failed effects waiting for an operator, at the last read. */
    long awaitingRedrive() {
        return awaitingRedrive;
    }

    /** Queued effects whose events row is gone, which no worker can take, at the last count. */
    long stale() {
        return stale;
    }

    /**
     * The oldest waiting effect's age: its age at the last read plus the time since. While a batch
     * is blocked, or the worker cannot read the queue (the database is down), the figure keeps
     * growing from what it last saw, so that an alert on it fires: an effect the worker saw queued is
     * assumed still queued until a read says otherwise.
     */
    long oldestQueuedSeconds() {
        if (queued() == 0) {
            return 0;
        }
        return (oldestQueuedMillisAtRead + (System.nanoTime() - readNanos) / 1_000_000) / 1000;
    }
}
