package io.onceflow.sink.postgres.internal;

import io.onceflow.api.Event;
import java.sql.Connection;
import java.sql.SQLException;
import org.apache.flink.annotation.Internal;

/**
 * Internal. Collects events and writes them to the event table as one idempotent upsert per batch:
 * a single {@code INSERT ... SELECT FROM unnest(<one array per column>) ON CONFLICT (id) DO UPDATE}
 * ({@link EventsTable} holds the statements and says why unnest). An id already in the table gets
 * its {@code deliveries} raised instead of a second row.
 *
 * <p>Its parts: the rows being filled ({@link RowBuffer}, which merges an id repeated in one
 * batch), the statement ({@link UpsertStatement}: a plain upsert, or with an {@link
 * EffectFunction} an upsert that also queues the effect of each new row), chosen once here, and the isolation of the rows the database refuses ({@link RefusedRows}).
 */
@Internal
public final class EventUpsertBatch {
    private final RowBuffer rows;
    private final UpsertStatement statement;
    /** The gid of the transaction the rows go into (exactly-once), or null (autocommit). */
    private String effectTransaction;

    /**
     * @param sinkPrefix the sink its queued effects are bound to; null without an effect function
     * @param effectFunction null for none
     */
    public EventUpsertBatch(String table, String rejectsTable, String sinkPrefix, String effectFunction, int capacity,
            PostgresSinkMetrics metrics) {
        EventsTable events = new EventsTable(table);
        RefusedRows refused = new RefusedRows(new RejectsTable(rejectsTable), metrics);
        this.statement = UpsertStatement.of(events, refused, sinkPrefix, effectFunction);
        this.rows = new RowBuffer(capacity);
    }

    /** The batch of a writer of the sink configured by {@code config}. */
    public static EventUpsertBatch of(PostgresSinkConfig config, PostgresSinkMetrics metrics) {
        return new EventUpsertBatch(config.tables().events(), config.tables().rejects(), config.sinkPrefix(),
                config.tables().effectFunction(), config.writer().batchSize(), metrics);
    }

    /**
     * Tags the effects that the next upserts queue with the gid of the transaction they go into
     * (exactly-once). Call before the first row of each transaction.
     */
    public void effectsBelongTo(TransactionId transaction) {
        effectTransaction = transaction.encode();
    }

    /** @return true if the batch is now full and should be written */
    public boolean add(Event event) {
        return rows.add(event);
    }

    public boolean isEmpty() {
        return rows.isEmpty();
    }

    /**
     * Empties the batch into an upsert that no longer depends on it, so that the batch can fill
     * again while another thread executes the upsert.
     */
    public Upsert take() {
        return statement.upsert(rows.take(), effectTransaction);
    }

    /** One batch's upsert, detached from the batch. */
    @FunctionalInterface
    public interface Upsert {
        /** Runs in {@code connection}'s current transaction (or autocommit). */
        void executeOn(Connection connection) throws SQLException;
    }
}
