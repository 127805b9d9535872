package io.onceflow.sink.postgres.options;

import java.io.Serializable;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * How the PostgreSQL sink's writers and committer work: batch size, the bounds of every wait, and
 * the writer lease. The defaults are the {@code DEFAULT_*} constants; {@link #problems()} checks the
 * ranges.
 *
 * <p>To add a tuning setting: a component here (with its default, its range in {@link #problems()}
 * and, for a PostgreSQL session setting, its entry in {@link #sessionSettings()}), its
 * {@code postgres.*} key in {@code ConfigKey}, and the line that reads it in {@code PostgresSettings}.
 *
 * @param batchSize distinct ids per INSERT statement
 * @param lockTimeout the longest wait for a row lock (PostgreSQL {@code lock_timeout})
 * @param statementTimeout the longest statement (PostgreSQL {@code statement_timeout})
 * @param writerLease how long a writer's session may stay silent before another attempt may presume
 *     it paused or dead and end it, where Flink's attempt order cannot decide (see "Zombie
 *     attempts" in docs/failover.md); writers renew it every third of it
 * @param heldEventsMemoryBytes how many bytes of events a writer attempt holds in memory before its
 *     first checkpoint barrier (where it claims, and may write); beyond that it spills them to a local
 *     file until the barrier ({@code HeldEvents})
 */
public record PostgresWriterOptions(int batchSize, Duration lockTimeout, Duration statementTimeout,
        Duration writerLease, int heldEventsMemoryBytes) implements Serializable {
    public static final int DEFAULT_BATCH_SIZE = 1000;
    public static final int MAX_BATCH_SIZE = 100_000;
    public static final Duration DEFAULT_LOCK_TIMEOUT = Duration.ofSeconds(30);
    public static final Duration DEFAULT_STATEMENT_TIMEOUT = Duration.ofSeconds(120);
    public static final Duration DEFAULT_WRITER_LEASE = Duration.ofSeconds(30);
    public static final int DEFAULT_HELD_EVENTS_MEMORY_BYTES = 32 << 20;
    /** Every timeout bounds a wait, so that a stuck lock becomes a restart instead of a hang. */
    public static final Duration MIN_TIMEOUT = Duration.ofMillis(1);
    /** PostgreSQL takes timeouts as {@code int} milliseconds. */
    public static final Duration MAX_TIMEOUT = Duration.ofMillis(Integer.MAX_VALUE);

    /** The defaults. */
    public static PostgresWriterOptions defaults() {
        return new PostgresWriterOptions(DEFAULT_BATCH_SIZE, DEFAULT_LOCK_TIMEOUT, DEFAULT_STATEMENT_TIMEOUT,
                DEFAULT_WRITER_LEASE, DEFAULT_HELD_EVENTS_MEMORY_BYTES);
    }

    public PostgresWriterOptions withBatchSize(int rows) {
        return new PostgresWriterOptions(rows, lockTimeout, statementTimeout, writerLease, heldEventsMemoryBytes);
    }

    public PostgresWriterOptions withLockTimeout(Duration timeout) {
        return new PostgresWriterOptions(batchSize, timeout, statementTimeout, writerLease, heldEventsMemoryBytes);
    }

    public PostgresWriterOptions withStatementTimeout(Duration timeout) {
        return new PostgresWriterOptions(batchSize, lockTimeout, timeout, writerLease, heldEventsMemoryBytes);
    }

    public PostgresWriterOptions withWriterLease(Duration lease) {
        return new PostgresWriterOptions(batchSize, lockTimeout, statementTimeout, lease, heldEventsMemoryBytes);
    }

    public PostgresWriterOptions withHeldEventsMemoryBytes(int bytes) {
        return new PostgresWriterOptions(batchSize, lockTimeout, statementTimeout, writerLease, bytes);
    }

    /**
     * The PostgreSQL settings that every connection of the sink pins from these options, name to
     * value, in the order they are set.
     */
    public Map<String, String> sessionSettings() {
        Map<String, String> settings = new LinkedHashMap<>();
        settings.put("lock_timeout", String.valueOf(lockTimeout.toMillis()));
        settings.put("statement_timeout", String.valueOf(statementTimeout.toMillis()));
        return settings;
    }

    /**
     * The lock timeout of a writer's claim transaction: it may wait for a paused holder's lease to
     * run out (twice, see "Zombie attempts" in docs/failover.md) before its own lock timeout.
     */
    public Duration claimLockTimeout() {
        return writerLease.multipliedBy(2).plus(lockTimeout);
    }

    /** The longest lock timeout that leaves {@link #claimLockTimeout()} within {@link #MAX_TIMEOUT}. */
    public static Duration maxLockTimeout(Duration writerLease) {
        return MAX_TIMEOUT.minus(writerLease.multipliedBy(2));
    }

    /** Every problem with these options, each saying what to do; empty when they are valid. */
    public List<String> problems() {
        List<String> problems = new ArrayList<>();
        if (batchSize < 1 || batchSize > MAX_BATCH_SIZE) {
            problems.add("batch size " + batchSize + " is out of range: use 1 to " + MAX_BATCH_SIZE);
        }
        checkTimeout(problems, "lock timeout", lockTimeout);
        checkTimeout(problems, "statement timeout", statementTimeout);
        checkTimeout(problems, "writer lease", writerLease);
        if (heldEventsMemoryBytes < 0) {
            problems.add("held events memory " + heldEventsMemoryBytes + " bytes is out of range: use 0 (spill every"
                    + " event held before the first barrier) or more");
        }
        if (problems.isEmpty() && lockTimeout.compareTo(maxLockTimeout(writerLease)) > 0) {
            problems.add("lock timeout " + lockTimeout + " plus twice the writer lease " + writerLease + " is more than"
                    + " PostgreSQL's longest lock_timeout, which a writer's claim needs: use at most "
                    + maxLockTimeout(writerLease));
        }
        return problems;
    }

    private static void checkTimeout(List<String> problems, String name, Duration timeout) {
        if (timeout == null || timeout.toMillis() < MIN_TIMEOUT.toMillis()
                || timeout.toMillis() > MAX_TIMEOUT.toMillis()) {
            problems.add(name + " " + timeout + " is out of range: use 1 ms to 24 days (a timeout bounds"
                    + " every wait, so that a stuck lock becomes a restart instead of a hang)");
        }
    }
}
