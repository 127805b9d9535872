package io.onceflow.sink.postgres.internal.schema;

import io.onceflow.sink.postgres.EffectFunction;
import org.apache.flink.annotation.Internal;

/**
 * Internal. The queue of effects still to be called: one row per new message id, inserted by the
 * statement that inserts the id's events row (so in the checkpoint's transaction, visible when it
 * commits), deleted by the transaction that calls the effect and stores its result. Named after
 * the events table, {@code <events>}{@value #SUFFIX}.
 *
 * <p><b>Why a table of its own</b> rather than a partial index on the events table: an index whose
 * predicate mentions {@code result} makes every update of {@code result} a non-HOT update (a new
 * heap tuple and new index entries for every effect); the events table now has only its primary
 * key, and storing a result can stay on the row's page. The queue is small (it holds the backlog),
 * its rows are inserted and deleted, never updated.
 *
 * <p>The only place its columns are spelled out.
 */
@Internal
public final class PendingEffectsTable {
    public static final String SUFFIX = "_effect_queue";
    /** PostgreSQL truncates identifiers at 63 bytes: the events table's own name may be this long. */
    public static final int MAX_EVENTS_NAME_LENGTH = 63 - SUFFIX.length();

    private final String name;
    private final String events;

    /** @param events the events table's validated name, {@code table} or {@code schema.table} */
    public PendingEffectsTable(String events) {
        this.events = events;
        this.name = events + SUFFIX;
    }

    public String name() {
        return name;
    }

    /**
     * The channel on which committers announce ({@code pg_notify}) that a transaction with queued
     * effects committed, and workers {@code LISTEN}: short, whatever the table's name.
     */
    public String notifyChannel() {
        return "onceflow_effects_" + Integer.toHexString(name.toLowerCase(java.util.Locale.ROOT).hashCode());
    }

    /** Announces on {@link #notifyChannel}: no parameter. */
    public String notifyStatement() {
        return "SELECT pg_notify('" + notifyChannel() + "', '')";
    }

    /** Whether the unqualified part of {@code eventsTable} leaves room for the suffix. */
    public static boolean fitsName(String eventsTable) {
        return eventsTable.substring(eventsTable.indexOf('.') + 1).length() <= MAX_EVENTS_NAME_LENGTH;
    }

    /** {@code CREATE TABLE IF NOT EXISTS}. */
    public String createStatement() {
        return "CREATE TABLE IF NOT EXISTS " + name + " (\n"
                + "    id text PRIMARY KEY,\n"
                + "    source_partition int,\n"
                + "    source_offset bigint,\n"
                + "    queued_at timestamptz NOT NULL DEFAULT clock_timestamp(),\n"
                + "    effect_transaction text\n"
                + ")";
    }

    /** The order effects are called in: the source's (partition, offset). */
    public String createSourceOrderIndexStatement() {
        String unqualified = name.substring(name.indexOf('.') + 1);
        return "CREATE INDEX IF NOT EXISTS " + unqualified + "_source_order ON " + name
                + " (source_partition, source_offset)";
    }

    /**
     * The rows inserted by the upsert in the CTE {@code written} (which returns {@code id,
     * source_partition, source_offset, effect_transaction, inserted}) that were new: for {@link
     * EventsTable#upsertQueuingStatement}.
     */
    String queueNewRowsOf(String written) {
        return "INSERT INTO " + name + " (id, source_partition, source_offset, effect_transaction)"
                + " SELECT id, source_partition, source_offset, effect_transaction FROM " + written + " WHERE inserted"
                // a queue row whose events row is gone (deleted by hand, or purged in a race with a re-drive)
                // is stale: the new row adopts it, instead of failing on the key as if its data were bad
                + " ON CONFLICT (id) DO UPDATE SET source_partition = EXCLUDED.source_partition,"
                + " source_offset = EXCLUDED.source_offset, effect_transaction = EXCLUDED.effect_transaction,"
                + " queued_at = clock_timestamp()";
    }

    /**
     * Locks up to parameter 2 queued effects whose events row is committed, in source order, skipping
     * those another worker holds and those of the partitions in parameter 1 (set aside after a
     * failure): returns their ids and partitions. The events rows are not locked: a writer's upsert
     * of a redelivered id must not wait for the effect calls.
     */
    public String lockBatchStatement() {
        return "SELECT q.id, q.source_partition FROM " + name + " q JOIN " + events + " e ON e.id = q.id"
                + " WHERE coalesce(q.source_partition, -1) <> ALL (?::int[])"
                + " ORDER BY q.source_partition, q.source_offset LIMIT ? FOR UPDATE OF q SKIP LOCKED";
    }

    /**
     * Whether a prepared transaction (of a checkpoint not committed yet) has written the queue: the
     * effects it queued are invisible until it commits. Prepared transactions hold their locks with
     * no backend ({@code pid IS NULL}).
     */
    public String queuedByPreparedTransactionsQuery() {
        return "SELECT count(*) FROM pg_locks WHERE relation = to_regclass('" + name + "') AND pid IS NULL"
                + " AND mode = 'RowExclusiveLock'";
    }

    /** Deletes the queued rows of the ids in parameter 1. */
    public String dequeueStatement() {
        return "DELETE FROM " + name + " WHERE id = ANY (?::text[])";
    }

    /** How many effects are queued, and the age of the oldest in seconds (0 when none). */
    public String backlogQuery() {
        return "SELECT count(*), coalesce(extract(epoch FROM clock_timestamp() - min(queued_at)), 0) FROM " + name;
    }

    /** Whether the events row of the id in the events table's alias {@code alias} is queued. */
    public String isQueued(String alias) {
        return "EXISTS (SELECT FROM " + name + " q WHERE q.id = " + alias + ".id)";
    }

    /**
     * Queues again the effects recorded as failed: of the ids in parameter 1, or every failed one
     * when parameter 1 is NULL. Their result goes back to NULL (pending) in the same transaction.
     * Returns the ids queued.
     */
    public String requeueFailedStatement() {
        return "WITH failed AS (UPDATE " + events + " SET result = NULL WHERE result->>'status' = '"
                + EffectFunction.FAILED + "' AND (?::text[] IS NULL OR id = ANY (?::text[]))"
                + " RETURNING id, source_partition, source_offset)"
                + " INSERT INTO " + name + " (id, source_partition, source_offset)"
                + " SELECT id, source_partition, source_offset FROM failed ON CONFLICT (id) DO NOTHING RETURNING id";
    }

    /**
     * Queues the rows of an events table from before this queue that wait for their effect, for the
     * migration ({@link #legacyIndex} finds them).
     */
    public String queueLegacyPendingStatement() {
        return "INSERT INTO " + name + " (id, source_partition, source_offset, effect_transaction)"
                + " SELECT id, source_partition, source_offset, effect_transaction FROM " + events
                + " WHERE result IS NULL AND effect_transaction IS NOT NULL ON CONFLICT (id) DO NOTHING";
    }

    /**
     * The partial index of pending effects on the events table of versions before this queue: its
     * predicate made every result update non-HOT, and the migration drops it.
     */
    public String legacyIndex() {
        return events + "_pending_effects";
    }
}
