package io.onceflow.sink.postgres.internal;

import static io.onceflow.sink.postgres.options.PostgresTableOptions.MAX_IDENTIFIER_LENGTH;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import io.onceflow.sink.postgres.options.PostgresTableOptions;
import org.apache.flink.annotation.Internal;

/**
 * Internal. The queue of effects not settled yet: one row per new message id, inserted by the
 * statement that inserts the id's events row (so in the checkpoint's transaction, visible when it
 * commits), deleted by the transaction that calls the effect and stores an applied or rejected
 * result. An effect that failed stays, marked {@code failed_at}, until an operator re-drives it
 * (the mark is cleared) or skips it (the row is deleted): so the failures waiting for an operator
 * are counted on this small table, and retention, which keeps every queued row, never deletes one.
 * Named after the events table, {@code <events>_effect_queue}
 * ({@code PostgresTableOptions.EFFECT_QUEUE_SUFFIX}).
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
    static final String SINK_PREFIX_COLUMN = "sink_prefix";
    static final String EFFECT_FUNCTION_COLUMN = "effect_function";
    static final String FAILED_AT_COLUMN = "failed_at";
    static final String SOURCE_TOPIC_COLUMN = "source_topic";
    /** The transaction that queued the row ({@code pg_current_xact_id()}): which snapshots see it. */
    static final String QUEUED_XID_COLUMN = "queued_xid";
    /** A row's topic and partition as the partition order index keys them: rows of an earlier version may have neither. */
    private static final String TOPIC_KEY = "coalesce(source_topic, '')";
    private static final String PARTITION_KEY = "coalesce(source_partition, -1)";
    private static final String PARTITION_ORDER_INDEX_SUFFIX = "_partition_order";
    /** The suffix of the index of the versions before the partition order index. */
    static final String SOURCE_ORDER_INDEX_SUFFIX = "_source_order";

    private final String name;
    private final String events;
    private final EffectLogTable log;
    private final EffectQueueUpgrade upgrade;

    /** @param events the events table's validated name, {@code table} or {@code schema.table} */
    public PendingEffectsTable(String events) {
        this.events = events;
        this.name = events + PostgresTableOptions.EFFECT_QUEUE_SUFFIX;
        this.log = new EffectLogTable(events, this);
        this.upgrade = new EffectQueueUpgrade(events, name);
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

    /** {@code CREATE TABLE IF NOT EXISTS}. */
    public String createStatement() {
        return "CREATE TABLE IF NOT EXISTS " + name + " (\n"
                + "    id text PRIMARY KEY,\n"
                + "    source_partition int,\n"
                + "    source_offset bigint,\n"
                + "    queued_at timestamptz NOT NULL DEFAULT clock_timestamp(),\n"
                + "    effect_transaction text,\n"
                + "    " + SINK_PREFIX_COLUMN + " text,\n"
                + "    " + EFFECT_FUNCTION_COLUMN + " text,\n"
                + "    " + FAILED_AT_COLUMN + " timestamptz,\n"
                + "    " + SOURCE_TOPIC_COLUMN + " text,\n"
                + "    " + QUEUED_XID_COLUMN + " xid8\n"
                + ")";
    }

    /**
     * The identity of the effect function named by parameter {@code ?}: its schema-qualified name
     * as the server resolves it, so that {@code apply_payment} and {@code public.apply_payment}
     * are one function whatever the search_path; NULL if there is no such function.
     */
    public static String functionIdentity() {
        return "(SELECT quote_ident(n.nspname) || '.' || quote_ident(p.proname) FROM pg_proc p"
                + " JOIN pg_namespace n ON n.oid = p.pronamespace WHERE p.oid = to_regprocedure(? || '(text,jsonb)'))";
    }

    /**
     * The index effects are taken by: per source partition ({@link #partitionsQuery}), its queued
     * effects in offset order ({@link #takeStatement}); without the failed ones, which wait for an
     * operator and hold back nothing.
     */
    public String createPartitionOrderIndexStatement() {
        return "CREATE INDEX IF NOT EXISTS " + partitionOrderIndexName() + " ON " + name + " ((" + TOPIC_KEY + "), ("
                + PARTITION_KEY + "), source_offset) WHERE " + FAILED_AT_COLUMN + " IS NULL";
    }

    /** The name of the index of {@link #createPartitionOrderIndexStatement}, schema-qualified as the queue is. */
    public String partitionOrderIndex() {
        return name.substring(0, name.indexOf('.') + 1) + partitionOrderIndexName();
    }

    /**
     * {@code <queue>_partition_order}, as PostgreSQL truncates it (at 63 bytes; the names are ASCII),
     * unless that would be the queue's own name or the name of the index it replaces ({@code
     * <queue>_source_order} truncated): for a queue name of 62 or 63 characters, the first 38 of it
     * and a hash of the whole. (IF NOT EXISTS skipped an index whose truncated name was taken, and
     * the start's check found the other relation: the batches read the whole backlog.)
     */
    private String partitionOrderIndexName() {
        String queue = unqualified().toLowerCase(Locale.ROOT);
        String plain = truncated(queue + PARTITION_ORDER_INDEX_SUFFIX);
        if (!plain.equals(queue) && !plain.equals(truncated(queue + SOURCE_ORDER_INDEX_SUFFIX))) {
            return plain;
        }
        String hash = String.format("_%08x", queue.hashCode());
        return queue.substring(0, MAX_IDENTIFIER_LENGTH - hash.length() - PARTITION_ORDER_INDEX_SUFFIX.length()) + hash
                + PARTITION_ORDER_INDEX_SUFFIX;
    }

    static String truncated(String identifier) {
        return identifier.substring(0, Math.min(identifier.length(), MAX_IDENTIFIER_LENGTH));
    }

    private String unqualified() {
        return name.substring(name.indexOf('.') + 1);
    }

    /**
     * The rows inserted by the upsert in the CTE {@code written} (which returns {@code id,
     * source_topic, source_partition, source_offset, effect_transaction, inserted}) that were new: for {@link
     * EventsTable#upsertQueuingStatement}, bound to the sink prefix and the function named by its two
     * parameters.
     */
    String queueNewRowsOf(String written) {
        return "INSERT INTO " + name + " (id, " + SOURCE_TOPIC_COLUMN + ", source_partition, source_offset,"
                + " effect_transaction, " + SINK_PREFIX_COLUMN + ", " + EFFECT_FUNCTION_COLUMN + ", " + QUEUED_XID_COLUMN
                + ") SELECT id, source_topic, source_partition, source_offset, effect_transaction, ?::text, "
                + functionIdentity() + ", pg_current_xact_id() FROM " + written
                + " WHERE inserted"
                // a queue row whose events row is gone (deleted by hand, or purged in a race with a re-drive)
                // is stale: the new row adopts it, instead of failing on the key as if its data were bad
                + " ON CONFLICT (id) DO UPDATE SET " + SOURCE_TOPIC_COLUMN + " = EXCLUDED." + SOURCE_TOPIC_COLUMN + ","
                + " " + FAILED_AT_COLUMN + " = NULL,"
                + " source_partition = EXCLUDED.source_partition,"
                + " source_offset = EXCLUDED.source_offset, effect_transaction = EXCLUDED.effect_transaction,"
                + " " + SINK_PREFIX_COLUMN + " = EXCLUDED." + SINK_PREFIX_COLUMN + ", " + EFFECT_FUNCTION_COLUMN
                + " = EXCLUDED." + EFFECT_FUNCTION_COLUMN + ", queued_at = clock_timestamp(), " + QUEUED_XID_COLUMN
                + " = EXCLUDED." + QUEUED_XID_COLUMN;
    }

    /**
     * The source partitions with effects queued to be called, by topic ({@code ''} for a row of an
     * earlier version without one) and partition ({@code -1} without one): a loose scan of the
     * partition order index, one index probe per partition, however long the backlog.
     */
    public String partitionsQuery() {
        String next = "SELECT " + TOPIC_KEY + " AS topic, " + PARTITION_KEY + " AS part FROM " + name + " WHERE "
                + FAILED_AT_COLUMN + " IS NULL%s ORDER BY " + TOPIC_KEY + ", " + PARTITION_KEY + " LIMIT 1";
        return "WITH RECURSIVE parts AS ((" + next.formatted("") + ") UNION ALL SELECT n.topic, n.part FROM parts p,"
                + " LATERAL (" + next.formatted(" AND (" + TOPIC_KEY + ", " + PARTITION_KEY + ") > (p.topic, p.part)")
                + ") n) SELECT topic, part FROM parts";
    }

    /**
     * For {@code SettledSnapshots}: this statement's snapshot ({@code pg_snapshot} text), a time no
     * earlier than it was taken, and the oldest of the sink's prepared transactions in this database now
     * (parameter 1: its gids' prefix), when it was prepared and its gid (NULL, NULL when none). Read in one
     * statement: the prepared transactions after the snapshot.
     */
    public static String settledQuery() {
        return "SELECT pg_current_snapshot()::text, clock_timestamp(), oldest.prepared, oldest.gid FROM (SELECT 1) now"
                + " LEFT JOIN LATERAL (SELECT prepared, gid FROM pg_prepared_xacts WHERE database = current_database()"
                + " AND starts_with(gid, ?) ORDER BY prepared LIMIT 1) oldest ON true";
    }

    /**
     * Takes the lock of the source partition of topic parameter 1 and partition parameter 2 (as
     * {@link #partitionsQuery} returns them) for the rest of the transaction, if no other transaction
     * holds it; true if taken, or held by this transaction already. A transaction-scoped advisory
     * lock, keyed by this queue, the topic and the partition: a paused worker's ends with its
     * session ({@code idle_in_transaction_session_timeout}).
     */
    public String tryLockPartitionStatement() {
        return "SELECT pg_try_advisory_xact_lock(hashtext('onceflow-effects:" + name + ":' || ?::text), ?::int)";
    }

    /**
     * Locks and returns the ids of up to parameter 6 effects queued to be called of the source
     * partition of topic parameter 4 and partition parameter 5, in offset order, those of the sink
     * prefix in parameter 2 and the function named by parameter 3 only (or of that sink with no
     * function: queued while it did not exist; a call of a missing function fails as transient and
     * is retried), whose events rows exist (a queue row whose events row is gone is never taken);
     * with {@code eventsColumn} (an expression over the events row {@code e}; null for none), its
     * value as a second column; last, whether the snapshot in parameter 1 ({@code pg_snapshot} text)
     * sees the row (rows queued by versions without {@value #QUEUED_XID_COLUMN} are old enough).
     *
     * <p>Run only while holding the partition's lock ({@link #tryLockPartitionStatement}), in a
     * statement after the one that took it: its snapshot is then taken after the batch that held the
     * partition before ended, so its first row is the partition's head. This is what keeps a
     * partition's order at any number of workers: no batch takes an effect of a partition while
     * another holds, calls or retries an earlier one. The events rows are not locked: a writer's
     * upsert of a redelivered id must not wait for the effect calls.
     */
    public String takeStatement(String eventsColumn) {
        return "SELECT q.id" + (eventsColumn == null ? "" : ", " + eventsColumn) + ", q." + QUEUED_XID_COLUMN
                + " IS NULL OR pg_visible_in_snapshot(q." + QUEUED_XID_COLUMN + ", ?::pg_snapshot) FROM " + name + " q JOIN " + events
                + " e ON e.id = q.id WHERE q." + SINK_PREFIX_COLUMN + " = ?::text AND (q." + EFFECT_FUNCTION_COLUMN
                + " = " + functionIdentity() + " OR q." + EFFECT_FUNCTION_COLUMN + " IS NULL)"
                // the queue's columns, as the partition order index names them
                + " AND " + queueKey(TOPIC_KEY) + " = ?::text AND " + queueKey(PARTITION_KEY) + " = ?::int AND q."
                + FAILED_AT_COLUMN + " IS NULL ORDER BY q.source_offset LIMIT ? FOR UPDATE OF q";
    }

    /** A key expression of the partition order index, over the queue's alias {@code q}. */
    private static String queueKey(String key) {
        return key.replace("source_", "q.source_");
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

    /** Marks the queued rows of the ids in parameter 1 failed: they wait for an operator. */
    public String markFailedStatement() {
        return "UPDATE " + name + " SET " + FAILED_AT_COLUMN + " = clock_timestamp() WHERE id = ANY (?::text[])";
    }

    /**
     * How many effects are queued to be called, the age of the oldest in seconds (0 when none), and
     * how many failed and wait for an operator: one pass over the queue, which holds the backlog.
     */
    public String backlogQuery() {
        return "SELECT count(*) FILTER (WHERE " + FAILED_AT_COLUMN + " IS NULL), coalesce(extract(epoch FROM"
                + " clock_timestamp() - min(queued_at) FILTER (WHERE " + FAILED_AT_COLUMN + " IS NULL)), 0),"
                + " count(*) FILTER (WHERE " + FAILED_AT_COLUMN + " IS NOT NULL) FROM " + name;
    }

    /**
     * Of the effects queued to be called, how many are stale, and the age in seconds of the oldest
     * that is not (0 when none). A stale one's events row is gone (deleted by hand, or with a restore),
     * so no worker can take it (the take joins the events row) until the message comes again and its
     * new row adopts it. A probe of the events table per queued effect: run only while something has
     * waited long ({@code EffectBacklog}).
     */
    public String staleQuery() {
        return "SELECT count(*) FILTER (WHERE e.id IS NULL), coalesce(extract(epoch FROM clock_timestamp()"
                + " - min(q.queued_at) FILTER (WHERE e.id IS NOT NULL)), 0) FROM " + name + " q LEFT JOIN " + events
                + " e ON e.id = q.id WHERE q." + FAILED_AT_COLUMN + " IS NULL";
    }

    /**
     * Whether the effect of the events row in the events table's alias {@code alias} is queued to
     * be called (not failed).
     */
    public String isQueued(String alias) {
        return "EXISTS (SELECT FROM " + name + " q WHERE q.id = " + alias + ".id AND q." + FAILED_AT_COLUMN + " IS NULL)";
    }

    /** Whether the events row in {@code alias} has a queue row: its effect is queued, or failed. */
    public String isUnsettled(String alias) {
        return "EXISTS (SELECT FROM " + name + " q WHERE q.id = " + alias + ".id)";
    }

    /** The statements that bring a queue, and an events table, of an earlier version up to this one. */
    public EffectQueueUpgrade upgrade() {
        return upgrade;
    }

    /** The history of what operators did to this queue's effects. */
    public EffectLogTable log() {
        return log;
    }

    /**
     * The queued effects by sink prefix and function, most first: each row the prefix, the function
     * (either NULL for rows of an earlier version; the function NULL for failed effects too, which
     * wait for an operator, whose re-drive binds them to the function it runs with) and the count.
     */
    public String bindingsQuery() {
        return "SELECT " + SINK_PREFIX_COLUMN + ", CASE WHEN " + FAILED_AT_COLUMN + " IS NULL THEN " + EFFECT_FUNCTION_COLUMN
                + " END, count(*) FROM " + name + " GROUP BY 1, 2 ORDER BY 3 DESC";
    }

    /**
     * How many effects the queue holds that a worker or an operator can act on: still to be called,
     * or failed and waiting for an operator; not a row whose events row is gone (deleted by hand),
     * which no worker takes.
     */
    public String countQuery() {
        return "SELECT count(*) FROM " + name + " q WHERE EXISTS (SELECT FROM " + events + " e WHERE e.id = q.id)";
    }

    /** As {@link #countQuery}, only the effects still to be called: what a final drain waits for. */
    public String toCallQuery() {
        return countQuery() + " AND q." + FAILED_AT_COLUMN + " IS NULL";
    }

    /**
     * Binds the effects that have no owner to the sink prefix in parameter 1 and the function named
     * by parameter 2: those queued by an earlier version, which let any sink apply them, and those of
     * the sink prefix in parameter 3 queued while its function did not exist (dropped while it ran).
     */
    public String adoptUnboundStatement() {
        return "UPDATE " + name + " SET " + SINK_PREFIX_COLUMN + " = ?, " + EFFECT_FUNCTION_COLUMN + " = "
                + functionIdentity() + " WHERE " + EFFECT_FUNCTION_COLUMN + " IS NULL AND (" + SINK_PREFIX_COLUMN
                + " IS NULL OR " + SINK_PREFIX_COLUMN + " = ?)";
    }

    /** The identity ({@link #functionIdentity}) of the function named by parameter 1, or NULL. */
    public static String functionIdentityQuery() {
        return "SELECT " + functionIdentity();
    }

    /**
     * What an operator runs to have the effects queued by the sink prefix {@code prefix} for the
     * function {@code from} applied by the function {@code to} instead: for the start's refusal.
     */
    public String rebindStatement(String prefix, String from, String to) {
        return "UPDATE " + name + " SET " + EFFECT_FUNCTION_COLUMN + " = '" + to.replace("'", "''") + "' WHERE "
                + SINK_PREFIX_COLUMN + " = '" + prefix + "' AND " + EFFECT_FUNCTION_COLUMN + " = '"
                + from.replace("'", "''") + "'";
    }

}
