package io.onceflow.sink.postgres.internal;

import io.onceflow.sink.postgres.options.SqlIdentifiers;
import org.apache.flink.annotation.Internal;

/**
 * Internal. The writers table: per sink prefix and subtask index, which attempt of which run holds it
 * (see {@link WriterClaim}).
 *
 * <p>Column {@code restored_checkpoint} holds the claim's {@link ClaimToken#claimCheckpoint}, the
 * barrier it was made at. It keeps the name it had before claims moved to barriers, so that
 * existing tables need no migration.
 *
 * <p>The only place this table's columns are spelled out.
 */
@Internal
final class WritersTable {
    /**
     * The claimer and attempt of an index's row before its first claim (see
     * {@link #insertUnclaimedStatement}).
     */
    public static final int UNCLAIMED = -1;
    private static final String COLUMNS =
            " (sink_prefix, subtask_index, run, restored_checkpoint, claimed_by_subtask, attempt, epoch, job_id)";
    private static final String CLAIM_COLUMNS_UPDATED = " run = EXCLUDED.run,"
            + " restored_checkpoint = EXCLUDED.restored_checkpoint, claimed_by_subtask = EXCLUDED.claimed_by_subtask,"
            + " attempt = EXCLUDED.attempt, epoch = EXCLUDED.epoch, job_id = EXCLUDED.job_id,"
            + " claimed_at = clock_timestamp()";

    private final String name;

    /**
     * @param name {@code table} or {@code schema.table}
     * @throws IllegalArgumentException if it is not a plain SQL identifier
     */
    public WritersTable(String name) {
        // checked again: a name goes into SQL text, and not every caller comes through the options
        this.name = SqlIdentifiers.requireTableName("writers table", name);
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

    /**
     * A condition (for another table's statement) that holds while a sink prefix's (parameter 1)
     * subtask index (parameter 2) is claimed by the writer of epoch parameter 3.
     */
    public String claimedByEpochCondition() {
        return "EXISTS (SELECT 1 FROM " + name + " WHERE sink_prefix = ? AND subtask_index = ? AND epoch = ?)";
    }

    /**
     * Records a claim on every index of a series that has no newer or equal claim, and returns the
     * indices it recorded. Parameters: sink prefix, run, claim checkpoint, claimed by subtask,
     * attempt, epoch, job id, then the series' first index, last index and step.
     */
    public String fenceSeriesStatement() {
        return "INSERT INTO " + name + COLUMNS + " SELECT ?, i, ?, ?, ?, ?, ?, ? FROM generate_series(?, ?, ?) AS i"
                + " ON CONFLICT (sink_prefix, subtask_index) DO UPDATE SET" + CLAIM_COLUMNS_UPDATED
                + " WHERE (" + name + ".run, coalesce(" + name + ".restored_checkpoint, " + ClaimToken.NO_CHECKPOINT
                + ")) < (EXCLUDED.run, EXCLUDED.restored_checkpoint) RETURNING subtask_index";
    }

    /**
     * Inserts the row of a sink prefix's (parameter 1) subtask index (parameter 2) with no claim
     * ({@link #UNCLAIMED}), unless it exists.
     */
    public String insertUnclaimedStatement() {
        return "INSERT INTO " + name + COLUMNS
                + " VALUES (?, ?, 0, NULL, " + UNCLAIMED + ", " + UNCLAIMED + ", 0, '')"
                + " ON CONFLICT (sink_prefix, subtask_index) DO NOTHING";
    }

    /**
     * The claim of a sink prefix's (parameter 1) subtask index (parameter 2): run, restored
     * checkpoint ({@link ClaimToken#NO_CHECKPOINT} for none), claimed by subtask, attempt.
     *
     * @param forUpdate whether to lock the row until the transaction ends
     */
    public String claimQuery(boolean forUpdate) {
        return "SELECT run, coalesce(restored_checkpoint, " + ClaimToken.NO_CHECKPOINT + "), claimed_by_subtask, attempt"
                + " FROM " + name + " WHERE sink_prefix = ? AND subtask_index = ?" + (forUpdate ? " FOR UPDATE" : "");
    }

    /**
     * Records a claim, replacing the index's earlier one. Parameters: sink prefix, subtask index,
     * run, restored checkpoint (null for none), claimed by subtask, attempt, epoch, job id.
     */
    public String recordClaimStatement() {
        return "INSERT INTO " + name + COLUMNS
                + " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (sink_prefix, subtask_index) DO UPDATE SET"
                + CLAIM_COLUMNS_UPDATED;
    }

    /** The job id of the newest claim of a sink prefix (parameter 1): the newest run's, newest first. */
    public String newestJobIdQuery() {
        return "SELECT job_id FROM " + name + " WHERE sink_prefix = ? ORDER BY run DESC, claimed_at DESC LIMIT 1";
    }
}
