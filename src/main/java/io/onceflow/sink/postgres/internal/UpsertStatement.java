package io.onceflow.sink.postgres.internal;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;

/**
 * How an {@link EventUpsertBatch} writes its rows to the events table: one implementation with an effect and
 * one without, chosen once when the batch is made ({@link #of}), so that nothing branches on the mode again.
 * Rows the database refuses go to the rejects table in every mode ({@link RefusedRows}).
 */
sealed interface UpsertStatement {

    /**
     * @param sinkPrefix the sink the queued effects are bound to, with {@code effectFunction}
     * @param effectFunction null for none
     */
    static UpsertStatement of(EventsTable events, RefusedRows refused, String sinkPrefix, String effectFunction) {
        return effectFunction == null ? new Plain(events.upsertStatement(), refused)
                : new QueuingEffects(events.upsertQueuingStatement(), refused, sinkPrefix, effectFunction);
    }

    /**
     * The write of {@code rows}, detached from the batch.
     *
     * @param transaction the gid of the transaction the rows go into, or null in autocommit (the
     *     at-least-once sink); only {@link QueuingEffects} uses it
     */
    EventUpsertBatch.Upsert upsert(Rows rows, String transaction);

    /** Without an effect: one upsert per batch. */
    record Plain(String sql, RefusedRows refused) implements UpsertStatement {
        @Override
        public EventUpsertBatch.Upsert upsert(Rows rows, String transaction) {
            return connection -> {
                RefusedRows.checkConstraintsPerStatement(connection);
                refused.write(connection, rows, this::execute);
            };
        }

        private void execute(Connection connection, Rows rows) throws SQLException {
            try (PreparedStatement upsert = connection.prepareStatement(sql)) {
                rows.bind(upsert, 1);
                upsert.executeUpdate();
            }
        }
    }

    /**
     * With an {@link EffectFunction}, the events table is the inbox: one upsert per batch that also
     * queues the effect of each new row ({@link PendingEffectsTable}), tagged with the gid of its
     * transaction (exactly-once) or none (at-least-once, autocommit), and bound to this sink and
     * function (no other sink's worker applies it, nor another function). The inbox row and its queued
     * effect commit together; the {@link EffectWorker}s apply the effect after that, in a
     * transaction of their own that never spans a checkpoint barrier.
     */
    record QueuingEffects(String sql, RefusedRows refused, String sinkPrefix, String effectFunction)
            implements UpsertStatement {
        @Override
        public EventUpsertBatch.Upsert upsert(Rows rows, String transaction) {
            return connection -> {
                RefusedRows.checkConstraintsPerStatement(connection);
                refused.write(connection, rows, (c, range) -> execute(c, range, transaction));
            };
        }

        private void execute(Connection connection, Rows rows, String transaction) throws SQLException {
            try (PreparedStatement upsert = connection.prepareStatement(sql)) {
                upsert.setString(1, transaction);
                rows.bind(upsert, 2);
                upsert.setString(2 + Rows.BOUND_PARAMETERS, sinkPrefix);
                upsert.setString(3 + Rows.BOUND_PARAMETERS, effectFunction);
                upsert.executeUpdate();
            }
        }
    }
}
