package io.onceflow.sink.postgres;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import org.apache.flink.annotation.Internal;
import org.postgresql.jdbc.PgConnection;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Internal. Calls the {@link EffectFunction} for rows of the events table and stores each result in
 * the row: one statement for all of them, under a savepoint, split in halves on an error about the
 * data until the failing rows stand alone (see {@link EventUpsertBatch#writeIsolatingRefusedRows});
 * each of those gets the result {@code {"status":"failed","sqlstate":...,"error":...}}.
 *
 * <p>The caller must make sure that the rows are its own for the statement: inserted by its own
 * transaction, or locked by it ({@code FOR UPDATE}) in an earlier statement, so that no concurrent
 * change makes PostgreSQL re-evaluate a row (read committed's recheck of an updated row evaluates
 * the SET list again, which would call the function twice).
 */
@Internal
final class EffectCalls {
    private static final Logger LOG = LoggerFactory.getLogger(EffectCalls.class);

    private final String callSql;
    private final String markFailedSql;
    private final PostgresSinkMetrics metrics;

    EffectCalls(String table, String effectFunction, PostgresSinkMetrics metrics) {
        SqlIdentifiers.requireTableName("table", table);
        SqlIdentifiers.requireFunctionName("effect function", effectFunction);
        // SQL NULL is kept for "not called"; counted in one row, as the call is one statement
        this.callSql = "WITH applied AS (UPDATE " + table + " AS e"
                + " SET result = coalesce(" + effectFunction + "(e.id, e.payload), 'null'::jsonb)"
                + " FROM unnest(?::text[]) AS n(id) WHERE e.id = n.id RETURNING e.result)"
                + " SELECT count(*), count(*) FILTER (WHERE result->>'status' = '" + EffectFunction.REJECTED + "')"
                + " FROM applied";
        this.markFailedSql = "UPDATE " + table + " SET result = jsonb_build_object('status', '"
                + EffectFunction.FAILED + "', 'sqlstate', ?::text, 'error', ?::text) WHERE id = ?";
        this.metrics = metrics;
    }

    /** Calls the effect for the rows of {@code rows}' ids, in {@code connection}'s open transaction. */
    void call(Connection connection, EventUpsertBatch.Rows rows) throws SQLException {
        EventUpsertBatch.writeIsolatingRefusedRows(connection, rows, this::callOnce, this::recordFailure);
    }

    private void callOnce(Connection connection, EventUpsertBatch.Rows rows) throws SQLException {
        try (PreparedStatement apply = connection.prepareStatement(callSql)) {
            apply.setArray(1, connection.unwrap(PgConnection.class).createArrayOf("text", rows.ids));
            try (ResultSet counts = apply.executeQuery()) {
                counts.next();
                long rejected = counts.getLong(2);
                metrics.effectsApplied.inc(counts.getLong(1) - rejected);
                metrics.effectsRejected.inc(rejected);
            }
        }
    }

    /** The effect raised a data error on the only row of {@code rows}: its result says so. */
    private void recordFailure(Connection connection, EventUpsertBatch.Rows rows, SQLException failure)
            throws SQLException {
        final int only = 0;
        String error = EventUpsertBatch.describe(failure);
        try (PreparedStatement update = connection.prepareStatement(markFailedSql)) {
            update.setString(1, failure.getSQLState());
            update.setString(2, error);
            update.setString(3, rows.ids[only]);
            update.executeUpdate();
        }
        metrics.effectsFailed.inc();
        LOG.warn("The effect function failed on message id '{}' with SQLSTATE {}: {}. Its result records the failure;"
                + " the message is consumed and not retried.", rows.ids[only], failure.getSQLState(), error);
    }
}
