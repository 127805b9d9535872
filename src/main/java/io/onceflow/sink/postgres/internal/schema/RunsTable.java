package io.onceflow.sink.postgres.internal.schema;

import io.onceflow.sink.postgres.PostgresTableOptions;
import org.apache.flink.annotation.Internal;

/**
 * Internal. The runs table: one row per start of a job with a sink prefix (a submission, not a
 * failover restart). The newest run owns the prefix; writers of older runs are zombies.
 *
 * <p>The only place this table's columns are spelled out.
 */
@Internal
public final class RunsTable {
    private final String name;

    /** @param name {@code table} or {@code schema.table}, validated by {@code PostgresTableOptions} */
    public RunsTable(String name) {
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
                + "    run bigint NOT NULL,\n"
                + "    job_name text NOT NULL,\n"
                + "    start_mode text NOT NULL,\n"
                + "    registered_at timestamptz NOT NULL DEFAULT clock_timestamp(),\n"
                + "    registered_from text,\n"
                + "    flink_job_id text,\n"
                + "    PRIMARY KEY (sink_prefix, run)\n"
                + ")";
    }

    /**
     * A runs table of an earlier version has no {@code flink_job_id} column, which a second execution
     * of a job's {@code main} finds its run by.
     */
    public String addJobIdColumnStatement() {
        return "ALTER TABLE " + name + " ADD COLUMN IF NOT EXISTS flink_job_id text";
    }
}
