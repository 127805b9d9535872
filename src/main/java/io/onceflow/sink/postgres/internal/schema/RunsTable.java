package io.onceflow.sink.postgres.internal.schema;

import org.apache.flink.annotation.Internal;

/**
 * Internal. The runs table: one row per start of a job with a sink prefix (a submission, not a
 * failover restart). The newest run owns the prefix; writers of older runs are zombies.
 *
 * <p>The only place this table's columns are spelled out.
 */
@Internal
public final class RunsTable {
    /**
     * The column a second execution of a job's {@code main} finds its run by, which a runs table of
     * an earlier version lacks (see {@link #addJobIdColumnStatement}), for the check whether it exists.
     */
    public static final String JOB_ID_COLUMN = "flink_job_id";

    private final String name;

    /**
     * @param name {@code table} or {@code schema.table}
     * @throws IllegalArgumentException if it is not a plain SQL identifier
     */
    public RunsTable(String name) {
        // checked again: a name goes into SQL text, and not every caller comes through the options
        this.name = SqlIdentifiers.requireTableName("runs table", name);
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

    /**
     * Registers a run whose id is the registering transaction's xid, and returns it. Parameters:
     * sink prefix, job name, start mode, Flink job id.
     */
    public String registerStatement() {
        return "INSERT INTO " + name + " (sink_prefix, run, job_name, start_mode, registered_from, flink_job_id)"
                + " VALUES (?, pg_current_xact_id()::text::bigint, ?, ?, host(inet_client_addr()), ?) RETURNING run";
    }

    /**
     * The newest run of a sink prefix (parameter 1) that this server has not issued yet as a
     * transaction id, null if none: such a run was registered on another server, and its rows came
     * with a logical restore ({@code pg_dump}) into this one.
     */
    public String runOfAnotherServerQuery() {
        return "SELECT max(run) FROM " + name + " WHERE sink_prefix = ?"
                + " AND run >= pg_snapshot_xmax(pg_current_snapshot())::text::bigint";
    }

    /** The newest run of a sink prefix (parameter 1); null if it has none. */
    public String newestRunQuery() {
        return "SELECT max(run) FROM " + name + " WHERE sink_prefix = ?";
    }

    /**
     * The newest run that a Flink job (parameter 1) registered, and the newest run of the sink
     * prefix (parameter 2); either null if there is none.
     */
    public String runOfJobAndNewestRunQuery() {
        return "SELECT max(run) FILTER (WHERE flink_job_id = ?),"
                + " max(run) FROM " + name + " WHERE sink_prefix = ?";
    }

    /**
     * The owner of a sink prefix (parameter 1), for messages: job id (null until a writer claimed
     * an index), run, job name, registration time and client address of its newest run. The job id
     * comes from the run's newest claim in {@code writers}: the one statement here that names that
     * table's columns, as a join needs both tables'.
     */
    public String ownerQuery(WritersTable writers) {
        return "SELECT w.job_id, r.run, r.job_name, r.registered_at, r.registered_from FROM " + name
                + " r LEFT JOIN " + writers.name() + " w ON w.sink_prefix = r.sink_prefix AND w.run = r.run"
                + " WHERE r.sink_prefix = ? ORDER BY r.run DESC, w.claimed_at DESC LIMIT 1";
    }
}
