package io.onceflow.sink.postgres.internal;

import io.onceflow.sink.postgres.options.SqlIdentifiers;
import java.util.List;
import org.apache.flink.annotation.Internal;

/**
 * Internal. The runs table: one row per start of a job with a sink prefix (a submission, not a
 * failover restart). The newest run owns the prefix; writers of older runs are zombies.
 *
 * <p>The only place this table's columns are spelled out.
 */
@Internal
final class RunsTable {
    /** The column a second execution of a job's {@code main} finds its run by. */
    private static final String JOB_ID_COLUMN = "flink_job_id";
    /** The start mode of a run that a writer recorded again after a server lost it. */
    private static final String ADOPTED = "ADOPTED";
    /**
     * Columns a runs table of an earlier version lacks, in the order they came, each with its type:
     * the Flink job id, and the identity of the server that registered the run
     * ({@code pg_control_system().system_identifier}, the WAL timeline; null where it could not be
     * read). All nullable, so that adding them never rewrites the table.
     */
    private static final List<String[]> ADDED_COLUMNS = List.of(
            new String[] {JOB_ID_COLUMN, "text"},
            new String[] {"system_identifier", "bigint"},
            new String[] {"timeline_id", "bigint"});

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
                + "    system_identifier bigint,\n"
                + "    timeline_id bigint,\n"
                + "    PRIMARY KEY (sink_prefix, run)\n"
                + ")";
    }

    /** The columns a runs table of an earlier version may lack (see {@link #addColumnStatement}). */
    public static List<String> addedColumns() {
        return ADDED_COLUMNS.stream().map(column -> column[0]).toList();
    }

    /** Adds one of {@link #addedColumns()} to a runs table of an earlier version. */
    public String addColumnStatement(String column) {
        String[] added = ADDED_COLUMNS.stream().filter(c -> c[0].equals(column)).findFirst()
                .orElseThrow(() -> new IllegalArgumentException("not an added column of the runs table: " + column));
        return "ALTER TABLE " + name + " ADD COLUMN IF NOT EXISTS " + added[0] + " " + added[1];
    }

    /**
     * Registers a run and returns its id: the registering transaction's xid, or, on a server whose
     * transaction-id counter went back behind a run of the prefix (a promoted replica or restored
     * copy of the same server), the next id after that run, so that the new run is still the newest.
     * Parameters: sink prefix (twice), job name, start mode, Flink job id, system identifier,
     * timeline (either may be null), the prefix's registration lock key. It takes that lock first
     * ({@link AdvisoryLocks#runRegistrationLock}): after the effect batches of earlier runs in flight.
     */
    public String registerStatement() {
        return "INSERT INTO " + name + " (sink_prefix, run, job_name, start_mode, registered_from, flink_job_id,"
                + " system_identifier, timeline_id) SELECT ?, GREATEST(pg_current_xact_id()::text::bigint,"
                + " (SELECT max(run) + 1 FROM " + name + " WHERE sink_prefix = ?)), ?, ?, host(inet_client_addr()),"
                + " ?, ?, ? FROM (SELECT " + AdvisoryLocks.runRegistrationLock(false) + ") AS registration_lock"
                + " RETURNING run";
    }

    /**
     * Records again a run that a writer still runs under but that the server lost (it failed over to
     * a copy taken before the run was registered). Parameters: sink prefix, run, Flink job id, system
     * identifier, timeline (either may be null). Does nothing if the run is there.
     */
    public String adoptStatement() {
        return "INSERT INTO " + name + " (sink_prefix, run, job_name, start_mode, registered_from, flink_job_id,"
                + " system_identifier, timeline_id) VALUES (?, ?, '(adopted after a server change)', '" + ADOPTED + "',"
                + " host(inet_client_addr()), ?, ?, ?) ON CONFLICT DO NOTHING";
    }

    /**
     * The newest run of a sink prefix (parameter 1) that this server has not issued yet as a
     * transaction id, and the system identifier recorded with it; no row if none. Such a run was
     * registered on another server (a logical restore, {@code pg_dump}), or on this server's
     * lineage before its counter went back (a failover to a replica that was behind).
     */
    public String runOfAnotherServerQuery() {
        return "SELECT run, system_identifier FROM " + name + " WHERE sink_prefix = ?"
                + " AND run >= pg_snapshot_xmax(pg_current_snapshot())::text::bigint ORDER BY run DESC LIMIT 1";
    }

    /**
     * The server identity recorded with a run: parameters sink prefix, run; columns system
     * identifier, timeline (null where unknown), and whether a writer adopted it after a server
     * change ({@link #adoptStatement}); no row if the run is not recorded.
     */
    public String identityOfRunQuery() {
        return "SELECT system_identifier, timeline_id, start_mode = '" + ADOPTED + "' FROM " + name
                + " WHERE sink_prefix = ? AND run = ?";
    }

    /**
     * The system identifier recorded with the newest run of a sink prefix (parameter 1) that has
     * one; no row if none: which server's lineage the prefix's runs come from.
     */
    public String newestRecordedSystemQuery() {
        return "SELECT system_identifier FROM " + name + " WHERE sink_prefix = ? AND system_identifier IS NOT NULL"
                + " ORDER BY run DESC LIMIT 1";
    }

    /**
     * The timelines of a sink prefix's submitted runs (not adopted) on one cluster: parameters
     * timeline, sink prefix, system identifier; columns the newest run submitted on that timeline,
     * the oldest and the newest timeline; each null if none.
     */
    public String timelinesOfClusterQuery() {
        return "SELECT max(run) FILTER (WHERE timeline_id = ?), min(timeline_id), max(timeline_id) FROM " + name
                + " WHERE sink_prefix = ? AND system_identifier = ? AND start_mode <> '" + ADOPTED + "'";
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
