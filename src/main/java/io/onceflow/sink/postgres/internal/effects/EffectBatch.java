package io.onceflow.sink.postgres.internal.effects;

import io.onceflow.sink.postgres.internal.PostgresConnections;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.schema.EventsTable;
import io.onceflow.sink.postgres.internal.schema.PendingEffectsTable;
import io.onceflow.sink.postgres.internal.writer.Rows;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import org.apache.flink.annotation.Internal;
import org.postgresql.jdbc.PgConnection;

/**
 * Internal. One transaction of effects: takes up to {@code limit} queued effects in source order
 * (partition, offset), skipping those another session holds; locks their keys ({@link
 * EffectKeys}); calls the function for them in that order and stores the results ({@link
 * EffectCalls}); and deletes them from the queue. All of it commits together or not at all: an
 * effect's changes, its recorded result and its leaving the queue are one, so however often this
 * runs, crashes or overlaps with another worker (a zombie's), each effect happens once.
 *
 * <p>Its rows are locked by {@code FOR UPDATE ... SKIP LOCKED} on both the queue row and the
 * events row: another worker's batch, or a prepared transaction holding a redelivery of the id
 * until its checkpoint completes, is skipped rather than waited for.
 */
@Internal
public final class EffectBatch {
    private final String lockBatchSql;
    private final String dequeueSql;
    private final EffectCalls calls;
    /** Null without a keys function. */
    private final EffectKeys keys;

    /** @param keysFunction null for none */
    public EffectBatch(EventsTable events, String effectFunction, String keysFunction, PostgresSinkMetrics metrics) {
        PendingEffectsTable queue = events.queue();
        this.lockBatchSql = queue.lockBatchStatement();
        this.dequeueSql = queue.dequeueStatement();
        this.calls = new EffectCalls(events, effectFunction, metrics);
        this.keys = keysFunction == null ? null : new EffectKeys(events, keysFunction);
    }

    /**
     * Runs one transaction of at most {@code limit} effects.
     *
     * @param connection in autocommit mode; left in autocommit mode
     * @return how many queued effects it took (called, or recorded as failed); 0 when none was free
     */
    public int run(Connection connection, int limit) throws SQLException {
        int[] taken = {0};
        PostgresConnections.inTransaction(connection, () -> {
            List<String> ids = lockBatch(connection, limit);
            if (ids.isEmpty()) {
                return;
            }
            Rows rows = Rows.ofIds(ids);
            calls.call(connection, keys == null ? rows : keys.lock(connection, rows, calls));
            try (PreparedStatement dequeue = connection.prepareStatement(dequeueSql)) {
                dequeue.setArray(1, connection.unwrap(PgConnection.class).createArrayOf("text", rows.ids));
                dequeue.executeUpdate();
            }
            taken[0] = ids.size();
        });
        return taken[0];
    }

    private List<String> lockBatch(Connection connection, int limit) throws SQLException {
        List<String> ids = new ArrayList<>();
        try (PreparedStatement lock = connection.prepareStatement(lockBatchSql)) {
            lock.setInt(1, limit);
            try (ResultSet rows = lock.executeQuery()) {
                while (rows.next()) {
                    ids.add(rows.getString(1));
                }
            }
        }
        return ids;
    }
}
