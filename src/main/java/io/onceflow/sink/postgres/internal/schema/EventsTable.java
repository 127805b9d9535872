package io.onceflow.sink.postgres.internal.schema;

import io.onceflow.sink.postgres.internal.commit.PendingEffects;
import org.apache.flink.annotation.Internal;

/**
 * Internal. The event table: one row per message id. A duplicate that escapes dedup (its id expired,
 * or a replay from an old savepoint) never makes a second row; it raises {@code deliveries}. With
 * an effect function it is the inbox, and {@code result} holds the effect's result.
 *
 * <p>The only place this table's columns are spelled out.
 */
@Internal
public final class EventsTable {
    private final String name;

    /** @param name {@code table} or {@code schema.table}, validated by {@code PostgresTableOptions} */
    public EventsTable(String name) {
        this.name = name;
    }

    /** The table's name, as configured. */
    public String name() {
        return name;
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
}
