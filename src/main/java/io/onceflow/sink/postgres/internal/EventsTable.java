package io.onceflow.sink.postgres.internal;

import io.onceflow.sink.postgres.options.SqlIdentifiers;
import org.apache.flink.annotation.Internal;

/**
 * Internal. The event table: one row per message id. A duplicate that escapes dedup (its id expired,
 * or a replay from an old savepoint) never makes a second row; it raises {@code deliveries}. With
 * an effect function it is the inbox, and {@code result} holds the effect's result.
 *
 * <p>The only place this table's columns are spelled out: its DDL and every statement the sink and
 * the audit run on it. The statements are built once, here; their callers bind the parameters, in
 * the order each method names.
 */
@Internal
public final class EventsTable {
    /** The effect's result; a table from before effects lacks it, and {@link #addResultColumnStatement} adds it. */
    public static final String RESULT_COLUMN = "result";
    /** The field of a failed result that names the sink whose effect failed (absent in earlier versions). */
    public static final String FAILED_SINK_FIELD = "sink";
    /**
     * The columns of a batch, bound as one array each (parameters 1 to 6: ids, payloads, topics,
     * partitions, offsets, deliveries). One {@code INSERT ... SELECT FROM unnest(<one array per
     * column>)} per batch: one statement and one round trip whatever the batch size; measured faster
     * than pgjdbc's rewritten multi-row batches (see the report of {@code EventUpsertBenchmark}).
     */
    private static final String BATCH_ROWS = " (id, payload, source_topic, source_partition, source_offset, deliveries)"
            + " SELECT * FROM unnest(?::text[], ?::text[]::jsonb[], ?::text[], ?::int[], ?::bigint[], ?::int[])";
    /** As {@link #BATCH_ROWS}, each tagged with the gid of the transaction (parameter 1, the arrays 2 to 7). */
    private static final String BATCH_ROWS_OF_A_TRANSACTION = " (id, payload, source_topic, source_partition,"
            + " source_offset, deliveries, effect_transaction) SELECT *, ?::text FROM unnest(?::text[],"
            + " ?::text[]::jsonb[], ?::text[], ?::int[], ?::bigint[], ?::int[])";

    private final String name;
    private final PendingEffectsTable queue;
    private final EffectOutcomesTable outcomes;
    private final String upsertSql;
    private final String upsertQueuingSql;
    private final String hasResultColumnSql;

    /**
     * @param name {@code table} or {@code schema.table}
     * @throws IllegalArgumentException if it is not a plain SQL identifier
     */
    public EventsTable(String name) {
        // checked again: a name goes into SQL text, and not every caller comes through the options
        this.name = SqlIdentifiers.requireTableName("table", name);
        this.queue = new PendingEffectsTable(name);
        this.outcomes = new EffectOutcomesTable(name);
        this.upsertSql = "INSERT INTO " + name + " AS existing" + BATCH_ROWS
                + " ON CONFLICT (id) DO UPDATE SET deliveries = existing.deliveries + EXCLUDED.deliveries";
        // a conflict leaves effect_transaction as the first insert set it, and queues nothing: the
        // effect stays once. xmax = 0 tells the rows the INSERT made from those it updated.
        this.upsertQueuingSql = "WITH written AS (INSERT INTO " + name + " AS existing" + BATCH_ROWS_OF_A_TRANSACTION
                + " ON CONFLICT (id) DO UPDATE SET deliveries = existing.deliveries + EXCLUDED.deliveries"
                + " RETURNING id, source_topic, source_partition, source_offset, effect_transaction, xmax = 0 AS inserted) "
                + queue.queueNewRowsOf("written");
        this.hasResultColumnSql = "SELECT EXISTS (SELECT FROM pg_attribute"
                + " WHERE attrelid = to_regclass(?) AND attname = 'result' AND NOT attisdropped)";
    }

    /** The table's name, as configured. */
    public String name() {
        return name;
    }

    /**
     * Locks up to parameter 2 rows first processed before parameter 1 (a timestamptz) whose effect is
     * settled (not in the queue: applied, rejected, skipped, or none), skipping rows a running writer
     * or a re-drive holds locked; returns their ids. The first statement of a purge batch: a re-drive
     * must lock a row to queue its effect again, so once locked, no re-drive can queue one of these
     * until the purge's transaction ends. A purged id that is delivered again makes a new row (and
     * calls its effect again): see docs/retention.md for the window this needs.
     */
    public String purgeLockStatement() {
        return "SELECT id FROM " + name + " e WHERE first_processed_at < ? AND NOT " + queue.isUnsettled("e")
                + " LIMIT ? FOR UPDATE SKIP LOCKED";
    }

    /**
     * The second statement of a purge batch: deletes the rows of the ids in parameter 1 (locked by
     * {@link #purgeLockStatement}) that are still settled, judged with this statement's snapshot,
     * which sees the queue row of a re-drive that committed after the first statement's. Returns the
     * count.
     */
    public String purgeDeleteStatement() {
        return "DELETE FROM " + name + " e WHERE e.id = ANY (?::text[]) AND NOT " + queue.isUnsettled("e");
    }

    /**
     * How many rows first processed before parameter 1 a purge keeps because their effect is not
     * settled: still to be called, or failed and waiting for an operator.
     */
    public String pendingEffectsBeforeQuery() {
        return "SELECT count(*) FROM " + name + " e WHERE first_processed_at < ? AND " + queue.isUnsettled("e");
    }

    /** {@code CREATE TABLE IF NOT EXISTS}. */
    public String createStatement() {
        return "CREATE TABLE IF NOT EXISTS " + name + " (\n"
                + "    id text PRIMARY KEY,\n"
                + "    payload jsonb,\n"
                + "    source_topic text,\n"
                + "    source_partition int,\n"
                + "    source_offset bigint,\n"
                + "    first_processed_at timestamptz NOT NULL DEFAULT now(),\n"
                + "    deliveries int NOT NULL DEFAULT 1,\n"
                + "    result jsonb,\n"
                + "    effect_transaction text\n"
                + ")";
    }

    /** The queue of this table's effects still to be called. */
    public PendingEffectsTable queue() {
        return queue;
    }

    /** The outbox of effect outcomes for a results topic. */
    public EffectOutcomesTable outcomes() {
        return outcomes;
    }

    /** The statement that adds the effect's columns to an events table created before it. */
    public String addResultColumnStatement() {
        return "ALTER TABLE " + name + " ADD COLUMN IF NOT EXISTS result jsonb,"
                + " ADD COLUMN IF NOT EXISTS effect_transaction text";
    }

    /**
     * Writes a batch: a new id gets its row, an id already in the table gets its {@code deliveries}
     * raised instead of a second row. Arrays as {@link #BATCH_ROWS}, parameters 1 to 6.
     */
    public String upsertStatement() {
        return upsertSql;
    }

    /**
     * As {@link #upsertStatement}, and queues the effect of each new row ({@link
     * PendingEffectsTable}), in the same statement: parameter 1 is the gid of the transaction the
     * rows go into (NULL in autocommit), the batch's arrays follow ({@link #BATCH_ROWS_OF_A_TRANSACTION}).
     */
    public String upsertQueuingStatement() {
        return upsertQueuingSql;
    }

    /**
     * Calls {@code function} for the rows of the ids in parameter 1 that have no result yet, in the
     * order of the array: returns each id and its result as JSON text (a SQL NULL result as {@code
     * null}). Reads the rows without locking them.
     *
     * <p>The order: the calls are made in a target list above a sort by the array's position, and
     * PostgreSQL evaluates volatile expressions of a target list after the sort (as it does for
     * {@code SELECT nextval(...) ... ORDER BY}); {@code BusinessEffectsTest} checks it.
     *
     * @param function a validated function name
     */
    public String callEffectStatement(String function) {
        return "SELECT e.id, coalesce(" + function + "(e.id, e.payload), 'null'::jsonb)::text"
                + " FROM unnest(?::text[]) WITH ORDINALITY AS n(id, position) JOIN " + name + " e ON e.id = n.id"
                + " WHERE e.result IS NULL ORDER BY n.position";
    }

    /**
     * Locks the rows of the ids in parameter 1 for storing their results, failing at once (55P03)
     * if another transaction holds one (a writer's open or prepared transaction with a redelivery of
     * the id): the effect transaction then retries rather than waits while holding its keys.
     */
    public String lockForResultsStatement() {
        return "SELECT count(*) FROM (SELECT FROM " + name + " WHERE id = ANY (?::text[]) FOR UPDATE NOWAIT) locked";
    }

    /**
     * Stores results: parameters 1 the ids, 2 their results as JSON text (NULL for a failure), 3 the
     * failures' SQLSTATEs, 4 their errors (NULL for a result) and 5 the sink prefix; a failure is
     * stored as {@code {"status":"failed","sqlstate":...,"error":...,"sink":...}}, the sink being the
     * one whose re-drive may queue it again. Returns the status of each row stored.
     */
    public String storeResultsStatement() {
        return "UPDATE " + name + " AS e SET result = CASE WHEN r.sqlstate IS NULL THEN r.result::jsonb"
                + " ELSE jsonb_build_object('status', '" + EffectFunction.FAILED + "', 'sqlstate', r.sqlstate,"
                + " 'error', r.error, '" + FAILED_SINK_FIELD + "', s.prefix) END"
                + " FROM unnest(?::text[], ?::text[], ?::text[], ?::text[]) AS r(id, result, sqlstate, error)"
                + " CROSS JOIN (SELECT ?::text) AS s(prefix) WHERE e.id = r.id RETURNING e.result->>'status'";
    }

    /**
     * Whether the table has the {@code result} column (a table from before effects has not):
     * parameter 1, the table's name.
     */
    public String hasResultColumnStatement() {
        return hasResultColumnSql;
    }

    /**
     * For the ids in parameter 1 that have a row: the id, whether its result is SQL NULL (pending,
     * or written without an effect function), the result's status, whether its effect is queued to
     * be called, and the sink its queue row is bound to (NULL without one). What the operator
     * commands say of an id they did not change.
     */
    public String effectStatesQuery() {
        return "SELECT e.id, e.result IS NULL, e.result->>'status', " + queue.isQueued("e") + ", (SELECT q."
                + PendingEffectsTable.SINK_PREFIX_COLUMN + " FROM " + queue.name() + " q WHERE q.id = e.id) FROM "
                + name + " e WHERE e.id = ANY (?::text[])";
    }

    /**
     * The audit's scan: per row its id, deliveries, whether it has no result, the result's status,
     * whether its effect is awaited (queued), and its source topic, partition and offset.
     *
     * @param hasResultColumn false for a table from before effects: as if no row had a result, and
     *     none awaits its effect
     */
    public String auditStatement(boolean hasResultColumn) {
        String result = hasResultColumn ? "result" : "NULL::jsonb";
        // rows written before the effect was configured are not queued for it
        // a queue row: its effect is still to be called, when the row has no result (a failed one has)
        String awaitsEffect = hasResultColumn ? queue.isUnsettled("e") : "false";
        return "SELECT id, deliveries, " + result + " IS NULL, " + result + "->>'status', " + awaitsEffect
                + ", source_topic, source_partition, source_offset FROM " + name + " e";
    }
}
