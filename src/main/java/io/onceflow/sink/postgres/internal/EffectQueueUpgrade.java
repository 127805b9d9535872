package io.onceflow.sink.postgres.internal;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.apache.flink.annotation.Internal;

/**
 * Internal. What brings the effect queue ({@link PendingEffectsTable}) and its events table of an
 * earlier version up to this one: the columns the queue lacks and what fills them, the index it
 * replaces, and the pending effects and failures the events table recorded before there was a
 * queue. The start runs them ({@link EffectQueueBinding}, {@link EffectQueueStartChecks}), or names
 * them for the tables' owner.
 */
@Internal
public final class EffectQueueUpgrade {
    private final String events;
    private final String name;

    /**
     * @param events the events table's validated name
     * @param name the queue's name
     */
    EffectQueueUpgrade(String events, String name) {
        this.events = events;
        this.name = name;
    }

    /**
     * The columns a queue of an earlier version lacks, with their types: those that bind each effect
     * to the sink (its {@code postgres.sink.prefix}) and the function ({@link PendingEffectsTable#functionIdentity})
     * that queued it, the failure mark, the topic, and the transaction that queued it (NULL for the
     * rows already there: committed long before any snapshot a worker takes). Nullable, so that adding them never rewrites the table; a
     * row without a binding (queued by an earlier version) has no owner until a start adopts it
     * ({@link PendingEffectsTable#adoptUnboundStatement}).
     */
    public static Map<String, String> addedColumns() {
        Map<String, String> columns = new LinkedHashMap<>();
        columns.put(PendingEffectsTable.SINK_PREFIX_COLUMN, "text");
        columns.put(PendingEffectsTable.EFFECT_FUNCTION_COLUMN, "text");
        columns.put(PendingEffectsTable.FAILED_AT_COLUMN, "timestamptz");
        columns.put(PendingEffectsTable.SOURCE_TOPIC_COLUMN, "text");
        columns.put(PendingEffectsTable.QUEUED_XID_COLUMN, "xid8");
        return columns;
    }

    /**
     * What adds one of {@link #addedColumns()} to a queue of an earlier version, in one transaction:
     * the ALTER TABLE, and what fills the column for the rows already there (with the failure mark,
     * the failures that version recorded only in the events rows; with the topic, each row's). The
     * start runs them, or names them for the table's owner.
     */
    public List<String> addColumnStatements(String column) {
        String type = addedColumns().get(column);
        if (type == null) {
            throw new IllegalArgumentException("not a column added to the effect queue: " + column);
        }
        String alter = "ALTER TABLE " + name + " ADD COLUMN IF NOT EXISTS " + column + " " + type;
        return switch (column) {
            case PendingEffectsTable.FAILED_AT_COLUMN -> List.of(alter, queueLegacyFailuresStatement());
            case PendingEffectsTable.SOURCE_TOPIC_COLUMN -> List.of(alter, backfillTopicStatement());
            default -> List.of(alter);
        };
    }

    /**
     * With the topic column added: the topic of every queued row, from its events row, so
     * that rows queued before and after the upgrade are one partition.
     */
    String backfillTopicStatement() {
        return "UPDATE " + name + " q SET " + PendingEffectsTable.SOURCE_TOPIC_COLUMN + " = e.source_topic FROM " + events
                + " e WHERE e.id = q.id AND q." + PendingEffectsTable.SOURCE_TOPIC_COLUMN + " IS NULL";
    }

    /**
     * The failures an earlier version recorded only in the events rows (they had left the queue, or
     * there was none) join it, marked failed, bound to the sink that recorded them (none before sinks
     * were recorded: the start adopts them) and to no function yet: with the failure mark
     * added, or a queue created for an events table of the version before it.
     */
    public String queueLegacyFailuresStatement() {
        return "INSERT INTO " + name + " (id, source_partition, source_offset, " + PendingEffectsTable.SINK_PREFIX_COLUMN + ", "
                + PendingEffectsTable.FAILED_AT_COLUMN + ") SELECT id, source_partition, source_offset, result->>'"
                + EventsTable.FAILED_SINK_FIELD + "', clock_timestamp() FROM " + events + " WHERE result->>'status' = '"
                + EffectFunction.FAILED + "' ON CONFLICT (id) DO NOTHING";
    }

    /**
     * What drops the index of the versions before {@link PendingEffectsTable#createPartitionOrderIndexStatement}: the
     * upgrade runs it in the same transaction as it creates the new one. None where its name,
     * truncated, is the queue's own (those versions could not create it).
     */
    public List<String> dropSourceOrderIndexStatements() {
        String queue = name.substring(name.indexOf('.') + 1).toLowerCase(Locale.ROOT);
        if (PendingEffectsTable.truncated(queue + PendingEffectsTable.SOURCE_ORDER_INDEX_SUFFIX).equals(queue)) {
            return List.of();
        }
        return List.of("DROP INDEX IF EXISTS " + name.substring(0, name.indexOf('.') + 1)
                + PendingEffectsTable.truncated(queue + PendingEffectsTable.SOURCE_ORDER_INDEX_SUFFIX));
    }

    /**
     * Queues the rows of an events table from before this queue that wait for their effect, for the
     * migration ({@link #legacyIndex} finds them), bound to the sink prefix in parameter 1 and the
     * function named by parameter 2.
     */
    public String queueLegacyPendingStatement() {
        return "INSERT INTO " + name + " (id, " + PendingEffectsTable.SOURCE_TOPIC_COLUMN + ", source_partition, source_offset,"
                + " effect_transaction, " + PendingEffectsTable.SINK_PREFIX_COLUMN + ", " + PendingEffectsTable.EFFECT_FUNCTION_COLUMN + ") SELECT id, source_topic,"
                + " source_partition, source_offset, effect_transaction, ?::text, " + PendingEffectsTable.functionIdentity() + " FROM " + events
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
