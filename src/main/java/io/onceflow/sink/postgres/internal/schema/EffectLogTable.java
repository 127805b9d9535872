package io.onceflow.sink.postgres.internal.schema;

import org.apache.flink.annotation.Internal;

/**
 * Internal. What operators did to effects: one row per re-drive or skip, with the reason given,
 * the result the effect had before, the role that did it and when. Written in the transaction that
 * re-drives or skips ({@link PendingEffectsTable}), so the history and the change are one. Named
 * after the events table, {@code <events>}{@value #SUFFIX} (shorter than the queue's suffix, so
 * any events name that leaves room for the queue leaves room for it). Retention leaves it: a few
 * rows per operator action.
 */
@Internal
public final class EffectLogTable {
    public static final String SUFFIX = "_effect_log";
    /** Re-driven: queued again after it failed or was rejected. */
    public static final String RETRIED = "retried";
    /** Skipped: a failed effect that is not to be called, with the operator's reason. */
    public static final String SKIPPED = "skipped";

    private final String name;

    /** @param events the events table's validated name, {@code table} or {@code schema.table} */
    EffectLogTable(String events) {
        this.name = events + SUFFIX;
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
    String logRowsOf(String rows, String action) {
        return "INSERT INTO " + name + " (id, action, reason, previous_result) SELECT id, '" + action
                + "', ?::text, result FROM " + rows;
    }

    /** The history of the ids in parameter 1, oldest first: id, action, reason, previous result, by, at. */
    public String historyQuery() {
        return "SELECT id, action, reason, previous_result::text, done_by, done_at FROM " + name
                + " WHERE id = ANY (?::text[]) ORDER BY done_at, id";
    }
}
