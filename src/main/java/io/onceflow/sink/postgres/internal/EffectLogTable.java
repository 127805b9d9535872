package io.onceflow.sink.postgres.internal;

import static io.onceflow.sink.postgres.internal.PendingEffectsTable.EFFECT_FUNCTION_COLUMN;
import static io.onceflow.sink.postgres.internal.PendingEffectsTable.FAILED_AT_COLUMN;
import static io.onceflow.sink.postgres.internal.PendingEffectsTable.SINK_PREFIX_COLUMN;
import static io.onceflow.sink.postgres.internal.PendingEffectsTable.SOURCE_TOPIC_COLUMN;
import static io.onceflow.sink.postgres.internal.PendingEffectsTable.functionIdentity;

import org.apache.flink.annotation.Internal;

/**
 * Internal. What operators do to effects, and the history of it: the statements that re-drive or
 * skip them, each of which also logs, in the same statement, one row per effect with the reason
 * given, the result the effect had before, the role that did it and when, so the history and the
 * change are one. Named after the events table, {@code <events>}{@value #SUFFIX} (shorter than the
 * queue's suffix, so any events name that leaves room for the queue leaves room for it). Retention
 * leaves it: a few rows per operator action.
 */
@Internal
public final class EffectLogTable {
    static final String SUFFIX = "_effect_log";
    /** Re-driven: queued again after it failed or was rejected. */
    private static final String RETRIED = "retried";
    /** Skipped: a failed effect that is not to be called, with the operator's reason. */
    private static final String SKIPPED = "skipped";

    private final String name;
    private final String events;
    private final PendingEffectsTable queue;

    /** @param events the events table's validated name, {@code table} or {@code schema.table} */
    EffectLogTable(String events, PendingEffectsTable queue) {
        this.name = events + SUFFIX;
        this.events = events;
        this.queue = queue;
    }

    public String name() {
        return name;
    }

    /** {@code CREATE TABLE IF NOT EXISTS}. */
    public String createStatement() {
        return "CREATE TABLE IF NOT EXISTS " + name + " (\n"
                + "    id text NOT NULL,\n"
                + "    action text NOT NULL,\n"
                + "    reason text,\n"
                + "    previous_result jsonb,\n"
                + "    done_by text NOT NULL DEFAULT current_user,\n"
                + "    done_at timestamptz NOT NULL DEFAULT clock_timestamp()\n"
                + ")";
    }

    /**
     * Logs {@code action}, with the reason bound to its one parameter, for each row of the CTE {@code
     * rows} (columns {@code id} and {@code result}: the result before the action).
     */
    private String logRowsOf(String rows, String action) {
        return "INSERT INTO " + name + " (id, action, reason, previous_result) SELECT id, '" + action
                + "', ?::text, result FROM " + rows;
    }

    /**
     * Re-drives failed effects: binds them to the function named by parameter 1 (the operator's);
     * of the ids in parameters 2 and 3 (the same array), or every one when it is NULL, that failed in
     * the sink prefix in parameter 4. Their failure mark is cleared, their result goes back to NULL
     * (pending), and each is logged with the reason in parameter 5, in one statement. Returns the
     * ids re-driven.
     */
    public String retryFailedStatement() {
        return "WITH redriven AS (UPDATE " + queue.name() + " SET " + FAILED_AT_COLUMN + " = NULL,"
                + " queued_at = clock_timestamp(), " + EFFECT_FUNCTION_COLUMN + " = " + functionIdentity()
                + " WHERE " + FAILED_AT_COLUMN + " IS NOT NULL"
                + " AND (?::text[] IS NULL OR id = ANY (?::text[])) AND " + SINK_PREFIX_COLUMN + " = ? RETURNING id),"
                + withPreviousResults("redriven") + ","
                + " logged AS (" + logRowsOf("previous", RETRIED) + ")"
                + " UPDATE " + events + " e SET result = NULL FROM redriven r WHERE e.id = r.id RETURNING e.id";
    }

    /**
     * Re-drives rejected effects, by name only (a rejection is a business outcome): of the ids in
     * parameter 1 whose result says rejected and that have no queue row, the result goes back to
     * NULL (pending) and they are queued, bound to the sink prefix in parameter 2 and the function
     * named by parameter 3, and logged with the reason in parameter 4. Returns the ids queued.
     */
    public String retryRejectedStatement() {
        return "WITH previous AS (SELECT e.id, e.result, e.source_topic, e.source_partition, e.source_offset FROM "
                + events + " e"
                + " WHERE e.id = ANY (?::text[]) AND e.result->>'status' = '" + EffectFunction.REJECTED + "'"
                + " AND NOT " + queue.isUnsettled("e") + " FOR UPDATE),"
                + " queued AS (INSERT INTO " + queue.name() + " (id, " + SOURCE_TOPIC_COLUMN + ", source_partition,"
                + " source_offset, " + SINK_PREFIX_COLUMN + ", " + EFFECT_FUNCTION_COLUMN + ")"
                + " SELECT id, source_topic, source_partition,"
                + " source_offset, ?::text, " + functionIdentity() + " FROM previous),"
                + " logged AS (" + logRowsOf("previous", RETRIED) + ")"
                + " UPDATE " + events + " e SET result = NULL FROM previous p WHERE e.id = p.id RETURNING e.id";
    }

    /**
     * Skips failed effects of the sink prefix in parameter 1: of the ids in parameter 2, the queue
     * row goes, the result becomes {@code {"status":"skipped","reason":...,"skipped":<the
     * failure>}} with the reason in parameter 3, logged with the same reason (parameter 4). Returns
     * the ids skipped.
     */
    public String skipFailedStatement() {
        return "WITH skipped AS (DELETE FROM " + queue.name() + " WHERE " + FAILED_AT_COLUMN + " IS NOT NULL AND "
                + SINK_PREFIX_COLUMN + " = ? AND id = ANY (?::text[]) RETURNING id),"
                + withPreviousResults("skipped") + ","
                + " marked AS (UPDATE " + events + " e SET result = jsonb_build_object('status', '"
                + EffectFunction.SKIPPED + "', 'reason', ?::text, 'skipped', e.result) FROM skipped s WHERE e.id = s.id"
                + " RETURNING e.id)"
                + " " + logRowsOf("previous", SKIPPED) + " RETURNING id";
    }

    /** The CTE {@code previous}: the id and result of the events rows of the ids in the CTE {@code ids}. */
    private String withPreviousResults(String ids) {
        return " previous AS (SELECT e.id, e.result FROM " + events + " e JOIN " + ids + " USING (id))";
    }
}
