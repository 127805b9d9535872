package io.onceflow.sink.postgres.internal;

import io.onceflow.sink.postgres.options.SqlIdentifiers;
import org.apache.flink.annotation.Internal;

/**
 * Internal. The rejects table: one row per message id that the database refused (a number or text the
 * column type cannot take, a user's CHECK constraint, a trigger's exception), with the SQLSTATE and
 * message, written in the same transaction as the rows that were accepted, so it is exactly-once
 * too. Nothing is dropped silently: the audit counts these rows. Payload as text: the database
 * refused the row, perhaps its payload as jsonb. Keyed by a hash of the id: the id itself may be
 * what the event table's index refused.
 *
 * <p>The only place this table's columns are spelled out: its DDL and every statement the sink and
 * the audit run on it, built once; their callers bind the parameters.
 */
@Internal
public final class RejectsTable {
    private final String name;
    private final String rejectSql;
    private final String auditSql;

    /**
     * @param name {@code table} or {@code schema.table}
     * @throws IllegalArgumentException if it is not a plain SQL identifier
     */
    public RejectsTable(String name) {
        // checked again: a name goes into SQL text, and not every caller comes through the options
        this.name = SqlIdentifiers.requireTableName("rejects table", name);
        this.rejectSql = "INSERT INTO " + name + " AS existing"
                + " (id, payload, source_topic, source_partition, source_offset, deliveries, sql_state, error)"
                + " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                + " ON CONFLICT (id_hash) DO UPDATE SET deliveries = existing.deliveries + EXCLUDED.deliveries";
        this.auditSql = "SELECT id, sql_state, deliveries, source_topic, source_partition, source_offset FROM " + name;
    }

    /** The table's name, as configured. */
    public String name() {
        return name;
    }

    /** {@code CREATE TABLE IF NOT EXISTS}. */
    public String createStatement() {
        return "CREATE TABLE IF NOT EXISTS " + name + " (\n"
                + "    id_hash uuid GENERATED ALWAYS AS (md5(id)::uuid) STORED PRIMARY KEY,\n"
                + "    id text NOT NULL,\n"
                + "    payload text,\n"
                + "    source_topic text,\n"
                + "    source_partition int,\n"
                + "    source_offset bigint,\n"
                + "    sql_state text NOT NULL,\n"
                + "    error text NOT NULL,\n"
                + "    first_rejected_at timestamptz NOT NULL DEFAULT now(),\n"
                + "    deliveries int NOT NULL DEFAULT 1\n"
                + ")";
    }

    /**
     * Records a refused row; a row refused again raises its {@code deliveries}. Parameters in column
     * order: id, payload, source topic, partition, offset, deliveries, SQLSTATE, error.
     */
    public String rejectStatement() {
        return rejectSql;
    }

    /** The audit's scan: per row its id, SQLSTATE, deliveries, and its source topic, partition and offset. */
    public String auditStatement() {
        return auditSql;
    }
}
