package io.onceflow.sink.postgres.options;

/**
 * How a job starts, as far as the exactly-once PostgreSQL sink is concerned (see
 * {@code PostgresRunRegistry.startRun}).
 */
public enum StartMode {
    /**
     * From a savepoint or a retained checkpoint: the restored committables are committed, the
     * prepared transactions of later checkpoints rolled back.
     */
    RESTORE,
    /**
     * Without a savepoint or checkpoint, refusing while the prefix has prepared transactions: some
     * of them may belong to a completed checkpoint whose input the consumer group has already
     * passed, so rolling them back would lose that output.
     */
    FRESH,
    /** Without a savepoint or checkpoint, rolling back whatever the prefix has prepared: chosen knowingly. */
    FRESH_DISCARDING_PENDING
}
