package io.onceflow.sink.postgres.internal.schema;

import io.onceflow.sink.postgres.EffectFunction;
import io.onceflow.sink.postgres.internal.commit.PendingEffects;
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

    /** A row whose effect is still to be called: the index of pending effects finds these. */
    private static final String AWAITING_EFFECT = "result IS NULL AND effect_transaction IS NOT NULL";

    private final String name;
    private final String upsertSql;
    private final String upsertTaggedSql;
    private final String insertNewSql;
    private final String addDeliveriesSql;
    private final String markEffectFailedSql;
    private final String lockPendingEffectsSql;
    private final String pendingEffectTransactionsSql;
    private final String hasResultColumnSql;

    /**
     * @param name {@code table} or {@code schema.table}
     * @throws IllegalArgumentException if it is not a plain SQL identifier
     */
    public EventsTable(String name) {
        // checked again: a name goes into SQL text, and not every caller comes through the options
        this.name = SqlIdentifiers.requireTableName("table", name);
        this.upsertSql = "INSERT INTO " + name + " AS existing" + BATCH_ROWS
                + " ON CONFLICT (id) DO UPDATE SET deliveries = existing.deliveries + EXCLUDED.deliveries";
        // a conflict leaves effect_transaction as the first insert set it: the effect stays once
        this.upsertTaggedSql = "INSERT INTO " + name + " AS existing" + BATCH_ROWS_OF_A_TRANSACTION
                + " ON CONFLICT (id) DO UPDATE SET deliveries = existing.deliveries + EXCLUDED.deliveries";
        this.insertNewSql = "INSERT INTO " + name + BATCH_ROWS + " ON CONFLICT (id) DO NOTHING RETURNING id";
        this.addDeliveriesSql = "UPDATE " + name + " AS existing SET deliveries = existing.deliveries + u.deliveries"
                + " FROM unnest(?::text[], ?::int[]) AS u(id, deliveries) WHERE existing.id = u.id";
        this.markEffectFailedSql = "UPDATE " + name + " SET result = jsonb_build_object('status', '"
                + EffectFunction.FAILED + "', 'sqlstate', ?::text, 'error', ?::text) WHERE id = ?";
        this.lockPendingEffectsSql = "SELECT id FROM " + name + " WHERE effect_transaction = ? AND result IS NULL"
                + " ORDER BY id LIMIT ? FOR UPDATE";
        this.pendingEffectTransactionsSql = "SELECT DISTINCT effect_transaction FROM " + name
                + " WHERE result IS NULL AND starts_with(effect_transaction, ?)";
        this.hasResultColumnSql = "SELECT EXISTS (SELECT FROM pg_attribute"
                + " WHERE attrelid = to_regclass(?) AND attname = 'result' AND NOT attisdropped)";
    }

    /** The table's name, as configured. */
    public String name() {
        return name;
    }

    /**
     * Deletes up to parameter 2 rows first processed before parameter 1 (a timestamptz), never a
     * row whose effect is still to be called (no result, a transaction that calls it), and skipping
     * rows a running writer holds locked (its prepared transaction's redelivery). Returns the count.
     * A purged id that is delivered again makes a new row (and calls its effect again): see
     * docs/operations.md, "Retention", for the window this needs.
     */
    public String purgeBatchStatement() {
        return "DELETE FROM " + name + " WHERE id IN (SELECT id FROM " + name + " WHERE first_processed_at < ?"
                + " AND NOT (" + AWAITING_EFFECT + ") LIMIT ? FOR UPDATE SKIP LOCKED)";
    }

    /**
     * How many rows first processed before parameter 1 a purge keeps because their effect is still
     * to be called.
     */
    public String pendingEffectsBeforeQuery() {
        return "SELECT count(*) FROM " + name + " WHERE first_processed_at < ? AND " + AWAITING_EFFECT;
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

    /**
     * The rows whose effect is still to be called, by the transaction that inserted them
     * ({@code PendingEffects}): small, as a row leaves it when its result is stored.
     */
    public String createPendingEffectsIndexStatement() {
        String unqualified = name.substring(name.indexOf('.') + 1);
        return "CREATE INDEX IF NOT EXISTS " + unqualified + "_pending_effects ON " + name
                + " (effect_transaction) WHERE result IS NULL AND effect_transaction IS NOT NULL";
    }

    /** The statement that adds the effect's columns to an events table created before it. */
    public String addResultColumnStatement() {
        return "ALTER TABLE " + name + " ADD COLUMN IF NOT EXISTS result jsonb,"
                + " ADD COLUMN IF NOT EXISTS effect_transaction text";
    }

    /**
     * Writes a batch: a new id gets its row, an id already in the table gets its {@code deliveries}
     * raised instead of a second row.
     *
     * @param tagged whether new rows are tagged with the gid of their transaction, for their effects
     *     at its commit: then parameter 1 is the gid and the batch's arrays follow ({@link
     *     #BATCH_ROWS_OF_A_TRANSACTION}); otherwise the arrays are parameters 1 to 6 ({@link #BATCH_ROWS})
     */
    public String upsertStatement(boolean tagged) {
        return tagged ? upsertTaggedSql : upsertSql;
    }

    /**
     * Inserts the rows of a batch whose ids are not in the table yet (arrays as {@link #BATCH_ROWS})
     * and returns those ids: RETURNING returns the inserted rows only.
     */
    public String insertNewStatement() {
        return insertNewSql;
    }

    /** Raises the {@code deliveries} of existing rows: parameters 1, the ids, and 2, their deliveries. */
    public String addDeliveriesStatement() {
        return addDeliveriesSql;
    }

    /**
     * Calls {@code function} for the rows of the ids in parameter 1 and stores each result; returns
     * one row: how many rows took a result and how many of those were rejected.
     *
     * @param function a validated function name
     */
    public String callEffectStatement(String function) {
        // SQL NULL is kept for "not called"; counted in one row, as the call is one statement
        return "WITH applied AS (UPDATE " + name + " AS e"
                + " SET result = coalesce(" + function + "(e.id, e.payload), 'null'::jsonb)"
                + " FROM unnest(?::text[]) AS n(id) WHERE e.id = n.id RETURNING e.result)"
                + " SELECT count(*), count(*) FILTER (WHERE result->>'status' = '" + EffectFunction.REJECTED + "')"
                + " FROM applied";
    }

    /** Records that the effect failed on a row: parameters 1, the SQLSTATE, 2, the error, and 3, the id. */
    public String markEffectFailedStatement() {
        return markEffectFailedSql;
    }

    /**
     * Locks the rows of a committed transaction whose effect is still to be called, in id order:
     * parameters 1, the gid, and 2, how many rows at most.
     */
    public String lockPendingEffectsStatement() {
        return lockPendingEffectsSql;
    }

    /** The gids that still have rows whose effect is to be called: parameter 1, the gids' prefix. */
    public String pendingEffectTransactionsStatement() {
        return pendingEffectTransactionsSql;
    }

    /**
     * Whether the table has the {@code result} column (a table from before effects has not):
     * parameter 1, the table's name.
     */
    public String hasResultColumnStatement() {
        return hasResultColumnSql;
    }

    /**
     * The audit's scan: per row its id, deliveries, whether it has no result, the result's status,
     * and whether its effect is awaited (the row's transaction calls it).
     *
     * @param hasResultColumn false for a table from before effects: as if no row had a result, and
     *     none awaits its effect
     */
    public String auditStatement(boolean hasResultColumn) {
        String result = hasResultColumn ? "result" : "NULL::jsonb";
        // rows written before the effect was configured have no transaction whose commit calls it
        String awaitsEffect = hasResultColumn ? "effect_transaction IS NOT NULL" : "false";
        return "SELECT id, deliveries, " + result + " IS NULL, " + result + "->>'status', " + awaitsEffect + " FROM "
                + name;
    }
}
