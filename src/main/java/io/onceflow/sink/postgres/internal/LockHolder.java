package io.onceflow.sink.postgres.internal;

import java.time.Duration;

/**
 * A session holding a subtask index's advisory lock ({@link AdvisoryLocks}), or a writer session
 * found by its name (index -1), as {@code pg_stat_activity} shows it. State and idle time are null where the server hides them
 * (another role without pg_read_all_stats).
 */
record LockHolder(int pid, int index, String applicationName, String clientAddress, String state,
        Double idleSeconds) {

    /** Not running a statement, and idle for longer than the lease: paused or gone. */
    boolean leaseExpired(Duration lease) {
        return state != null && !"active".equals(state) && idleSeconds != null
                && idleSeconds * 1000 > lease.toMillis();
    }

    /**
     * Whether the session is a writer of {@code sinkPrefix}, by its {@code application_name}: a
     * holder with another name is a hash collision of two prefixes' lock keys, or another
     * application using the same advisory lock, and is never terminated.
     */
    boolean isWriterOf(String sinkPrefix) {
        return applicationName != null
                && applicationName.startsWith(PostgresConnections.applicationName(sinkPrefix, "writer-"));
    }

    @Override
    public String toString() {
        return "pid " + pid + ", " + applicationName + " from " + clientAddress + ", " + state
                + (idleSeconds == null ? "" : String.format(" for %.1f s", idleSeconds));
    }
}
