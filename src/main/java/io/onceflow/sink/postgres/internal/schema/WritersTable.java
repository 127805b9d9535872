package io.onceflow.sink.postgres.internal.schema;

import io.onceflow.sink.postgres.PostgresTableOptions;
import io.onceflow.sink.postgres.internal.fencing.WriterFence;
import org.apache.flink.annotation.Internal;

/**
 * Internal. The writers table: per sink prefix and subtask index, which attempt of which run holds it
 * (see {@code WriterFence}).
 *
 * <p>The only place this table's columns are spelled out.
 */
@Internal
public final class WritersTable {
    private final String name;

    /** @param name {@code table} or {@code schema.table}, validated by {@code PostgresTableOptions} */
    public WritersTable(String name) {
        this.name = name;
    }

    /** The table's name, as configured. */
    public String name() {
        return name;
    }

    /** {@code CREATE TABLE IF NOT EXISTS}. */
    public String createStatement() {
        return "CREATE TABLE IF NOT EXISTS " + name + " (\n"
                + "    sink_prefix text NOT NULL,\n"
                + "    subtask_index int NOT NULL,\n"
                + "    run bigint NOT NULL,\n"
                + "    restored_checkpoint bigint,\n"
                + "    claimed_by_subtask int NOT NULL,\n"
                + "    attempt int NOT NULL,\n"
                + "    epoch bigint NOT NULL,\n"
                + "    job_id text NOT NULL,\n"
                + "    claimed_at timestamptz NOT NULL DEFAULT clock_timestamp(),\n"
                + "    PRIMARY KEY (sink_prefix, subtask_index)\n"
                + ")";
    }
}
