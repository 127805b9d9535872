package io.onceflow.sink.postgres.internal;

import io.onceflow.sink.postgres.options.SqlIdentifiers;
import org.apache.flink.annotation.Internal;

/**
 * Internal. The commit log: one row per committed transaction, written inside that transaction, so
 * that after a restore the committer can tell a transaction that was already committed (logged, no
 * longer prepared) from one that was lost (neither). It grows by one row per checkpoint and writer
 * subtask.
 *
 * <p>The only place this table's columns are spelled out.
 */
@Internal
public final class CommitLogTable {
    private final String name;

    /**
     * @param name {@code table} or {@code schema.table}
     * @throws IllegalArgumentException if it is not a plain SQL identifier
     */
    public CommitLogTable(String name) {
        // checked again: a name goes into SQL text, and not every caller comes through the options
        this.name = SqlIdentifiers.requireTableName("commit log table", name);
    }

    /** The table's name, as configured. */
    public String name() {
        return name;
    }

    /** {@code CREATE TABLE IF NOT EXISTS}. */
    public String createStatement() {
        return "CREATE TABLE IF NOT EXISTS " + name + " (\n"
                + "    gid text PRIMARY KEY,\n"
                + "    committed_at timestamptz NOT NULL DEFAULT clock_timestamp()\n"
                + ")";
    }

    /**
     * Logs a gid (parameter 1) only if the statement runs in the session whose backend pid is
     * parameter 2, and only while the writers table's row of the sink prefix (parameter 3) and
     * subtask index (parameter 4) holds the writer's epoch (parameter 5). The writer's own session:
     * a transaction-pooling proxy that moved the connection to another session inserts nothing (and
     * is caught before PREPARE). Its own claim: a writer that lost its index to a newer attempt
     * inserts nothing and cannot prepare, even if its session was not ended.
     */
    public String insertWhileClaimedStatement(WritersTable writers) {
        return "INSERT INTO " + name + " (gid) SELECT ? WHERE pg_backend_pid() = ? AND "
                + writers.claimedByEpochCondition();
    }

    /** A row if the gid (parameter 1) was committed. */
    public String isLoggedQuery() {
        return "SELECT 1 FROM " + name + " WHERE gid = ?";
    }

    /**
     * Deletes up to parameter 3 rows of the gids starting with parameter 1 (one sink prefix's) that
     * were logged before parameter 2 (a timestamptz); returns the count. A row is logged when its
     * transaction is prepared, at its checkpoint: a restore of a checkpoint taken after parameter 2
     * finds every row it asks for.
     */
    public String purgeBatchStatement() {
        return "DELETE FROM " + name + " WHERE gid IN (SELECT gid FROM " + name
                + " WHERE starts_with(gid, ?) AND committed_at < ? LIMIT ? FOR UPDATE SKIP LOCKED)";
    }
}
