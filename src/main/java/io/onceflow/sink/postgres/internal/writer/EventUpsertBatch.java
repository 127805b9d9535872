package io.onceflow.sink.postgres.internal.writer;

import io.onceflow.api.Event;
import io.onceflow.sink.postgres.EffectFunction;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.commit.PendingEffects;
import io.onceflow.sink.postgres.internal.commit.TransactionId;
import io.onceflow.sink.postgres.internal.schema.EventsTable;
import io.onceflow.sink.postgres.internal.schema.RejectsTable;
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
 * batch), the statement of the sink's mode ({@link UpsertStatement}: a plain upsert, an upsert
 * that tags rows for their {@link EffectFunction} at commit, or the inbox's three statements),
 * chosen once here, and the isolation of the rows the database refuses ({@link RefusedRows}).
 */
@Internal
public final class EventUpsertBatch {
    private final RowBuffer rows;
    private final UpsertStatement statement;
    /** The gid of the transaction the rows go into, when effects are called at its commit. */
    private String effectTransaction;

    /**
     * @param effectFunction null for none
     * @param effectsAtCommit whether the effect is called after the transaction commits, for the rows
     *     it inserted ({@link PendingEffects}, the exactly-once sink), rather than in the batch (the
     *     at-least-once sink); ignored without an effect
     */
    public EventUpsertBatch(String table, String rejectsTable, String effectFunction, boolean effectsAtCommit,
            int capacity, PostgresSinkMetrics metrics) {
        EventsTable events = new EventsTable(table);
        RefusedRows refused = new RefusedRows(new RejectsTable(rejectsTable), metrics);
        this.statement = UpsertStatement.of(events, refused, effectFunction, effectsAtCommit, metrics);
        this.rows = new RowBuffer(capacity);
    }

    /** The batch of a writer of the sink configured by {@code config}; see the constructor for {@code effectsAtCommit}. */
    public static EventUpsertBatch of(PostgresSinkConfig config, boolean effectsAtCommit, PostgresSinkMetrics metrics) {
        return new EventUpsertBatch(config.tables().events(), config.tables().rejects(), config.tables().effectFunction(), effectsAtCommit,
                config.writer().batchSize(), metrics);
    }

    /**
     * Tags the rows that the next upserts insert with the gid of the transaction they go into (with
     * effects at commit; ignored otherwise). Call before the first row of each transaction.
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
