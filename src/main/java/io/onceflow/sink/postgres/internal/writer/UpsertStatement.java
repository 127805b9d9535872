package io.onceflow.sink.postgres.internal.writer;

import io.onceflow.sink.postgres.EffectFunction;
import io.onceflow.sink.postgres.internal.PostgresConnections;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.commit.EffectCalls;
import io.onceflow.sink.postgres.internal.commit.PendingEffects;
import io.onceflow.sink.postgres.internal.schema.EventsTable;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.postgresql.jdbc.PgConnection;

/**
 * How an {@link EventUpsertBatch} writes its rows to the events table: one implementation per mode,
 * chosen once when the batch is made ({@link #of}), so that nothing branches on the mode again.
 * Rows the database refuses go to the rejects table in every mode ({@link RefusedRows}).
 */
sealed interface UpsertStatement {

    /**
     * @param effectFunction null for none
     * @param effectsAtCommit whether the effect is called after the transaction commits, for the rows
     *     it inserted ({@link PendingEffects}, the exactly-once sink), rather than in the batch (the
     *     at-least-once sink); ignored without an effect
     */
    static UpsertStatement of(EventsTable events, RefusedRows refused, String effectFunction, boolean effectsAtCommit,
            PostgresSinkMetrics metrics) {
        if (effectFunction == null) {
            return new Plain(events.upsertStatement(false), refused);
        }
        if (effectsAtCommit) {
            return new TaggingEffects(events.upsertStatement(true), refused);
        }
        return new Inbox(events.insertNewStatement(), events.addDeliveriesStatement(), refused,
                new EffectCalls(events, effectFunction, metrics));
    }

    /**
     * The write of {@code rows}, detached from the batch.
     *
     * @param transaction the gid of the transaction the rows go into, or null when the batch was not
     *     told ({@link EventUpsertBatch#effectsBelongTo}); only {@link TaggingEffects} uses it
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
     * With effects called at commit (the exactly-once sink): one upsert per batch that tags each
     * new row with the gid of its transaction, so that the committer calls its effect after that
     * transaction commits ({@link PendingEffects}).
     */
    record TaggingEffects(String sql, RefusedRows refused) implements UpsertStatement {
        @Override
        public EventUpsertBatch.Upsert upsert(Rows rows, String transaction) {
            if (transaction == null) {
                throw new IllegalStateException("effectsBelongTo must name the transaction before its first rows");
            }
            return connection -> {
                RefusedRows.checkConstraintsPerStatement(connection);
                refused.write(connection, rows, (c, range) -> execute(c, range, transaction));
            };
        }

        private void execute(Connection connection, Rows rows, String transaction) throws SQLException {
            try (PreparedStatement upsert = connection.prepareStatement(sql)) {
                upsert.setString(1, transaction);
                rows.bind(upsert, 2);
                upsert.executeUpdate();
            }
        }
    }

    /**
     * With an {@link EffectFunction} called in the batch (the at-least-once sink), the events table
     * is the inbox, and a batch takes three statements instead of one, whatever its size, in the open
     * transaction (in autocommit the batch is a transaction of its own: no inbox row commits without
     * its effect):
     *
     * <ol>
     *   <li>{@code INSERT ... ON CONFLICT (id) DO NOTHING RETURNING id}: RETURNING returns the
     *       inserted rows only, so these are the new ids. Rows the database refuses are isolated as
     *       in every mode.
     *   <li>{@code UPDATE ... SET deliveries = deliveries + n} for the others: a new statement, so in
     *       read committed it sees a row that another transaction committed while the insert waited
     *       for it.
     *   <li>{@code UPDATE ... SET result = f(id, payload)} for the new ids, counting the results. It
     *       runs under a savepoint of its own: when the function raises an error about the data (the
     *       classes of {@link RowIsolation#isRowDataError}, e.g. {@code RAISE EXCEPTION}), the new ids
     *       are split in halves until the failing ones stand alone, and each of those gets the result
     *       {@code {"status":"failed","sqlstate":...,"error":...}} (the message stays consumed). Every
     *       other error fails the task, which replays from the checkpoint ({@link EffectCalls}).
     * </ol>
     */
    record Inbox(String insertNewSql, String addDeliveriesSql, RefusedRows refused, EffectCalls effectCalls)
            implements UpsertStatement {
        @Override
        public EventUpsertBatch.Upsert upsert(Rows rows, String transaction) {
            return connection -> {
                if (connection.getAutoCommit()) {
                    PostgresConnections.inTransaction(connection, () -> write(connection, rows));
                } else {
                    write(connection, rows);
                }
            };
        }

        private void write(Connection connection, Rows rows) throws SQLException {
            RefusedRows.checkConstraintsPerStatement(connection);
            Set<String> inserted = new HashSet<>();
            Set<String> refusedIds = new HashSet<>();
            refused.write(connection, rows, (c, range) -> inserted.addAll(insertNew(c, range)),
                    (c, row, refusal) -> {
                        refused.reject(c, row, refusal);
                        refusedIds.add(row.ids[0]);
                    });
            refused.write(connection, rows.select(id -> !inserted.contains(id) && !refusedIds.contains(id)),
                    this::addDeliveries);
            Rows newRows = rows.select(inserted::contains);
            if (newRows.size() > 0) {
                effectCalls.serialize(connection);
                effectCalls.call(connection, newRows);
            }
        }

        /** @return the ids of {@code rows} that were not in the table yet */
        private List<String> insertNew(Connection connection, Rows rows) throws SQLException {
            List<String> inserted = new ArrayList<>(rows.size());
            try (PreparedStatement insert = connection.prepareStatement(insertNewSql)) {
                rows.bind(insert, 1);
                try (ResultSet returned = insert.executeQuery()) {
                    while (returned.next()) {
                        inserted.add(returned.getString(1));
                    }
                }
            }
            return inserted;
        }

        private void addDeliveries(Connection connection, Rows rows) throws SQLException {
            PgConnection pg = connection.unwrap(PgConnection.class);
            try (PreparedStatement update = connection.prepareStatement(addDeliveriesSql)) {
                update.setArray(1, pg.createArrayOf("text", rows.ids));
                update.setArray(2, pg.createArrayOf("int4", rows.deliveries));
                update.executeUpdate();
            }
        }
    }
}
