package io.onceflow.sink.postgres.internal.schema;

import io.onceflow.sink.postgres.PostgresTableOptions;
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

    /** @param name {@code table} or {@code schema.table}, validated by {@code PostgresTableOptions} */
    public CommitLogTable(String name) {
        this.name = name;
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
}
