package io.onceflow.sink.postgres.internal.effects;

import io.onceflow.sink.postgres.EffectFunction;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.schema.EventsTable;
import io.onceflow.sink.postgres.internal.schema.SqlIdentifiers;
import io.onceflow.sink.postgres.internal.writer.RowIsolation;
import io.onceflow.sink.postgres.internal.writer.Rows;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import org.apache.flink.annotation.Internal;
import org.postgresql.jdbc.PgConnection;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Internal. Calls the {@link EffectFunction} for rows of the events table, in the order given
 * (source order), and stores each result in the row: one statement for all of them, under a
 * savepoint, split in halves on an error about one message's data until the failing rows stand
 * alone (the same loop as for refused rows, {@link RowIsolation}); each of those gets the result
 * {@code {"status":"failed","sqlstate":...,"error":...}}. Any other error is about the environment
 * ({@link EffectFailures}) and rolls the whole transaction back, to be tried again.
 *
 * <p>The caller must hold the rows locked ({@code FOR UPDATE}, {@link EffectBatch}) so that no
 * concurrent change makes PostgreSQL re-evaluate a row (read committed's recheck of an updated row
 * would call the function twice).
 */
@Internal
public final class EffectCalls {
    private static final Logger LOG = LoggerFactory.getLogger(EffectCalls.class);

    private final String table;
    private final String callSql;
    private final String markFailedSql;
    private final PostgresSinkMetrics metrics;

    public EffectCalls(EventsTable events, String effectFunction, PostgresSinkMetrics metrics) {
        this.table = events.name();
        SqlIdentifiers.requireFunctionName("effect function", effectFunction);
        this.callSql = events.callEffectStatement(effectFunction);
        this.markFailedSql = events.markEffectFailedStatement();
        this.metrics = metrics;
    }

    /** Calls the effect for the rows of {@code rows}' ids, in that order, in {@code connection}'s open transaction. */
    public void call(Connection connection, Rows rows) throws SQLException {
        RowIsolation.isolatingFailingRows(connection, rows, this::callOnce, EffectFailures::isAboutTheMessage,
                (c, row, failure) -> recordFailure(c, row.ids[0], failure));
    }

    private void callOnce(Connection connection, Rows rows) throws SQLException {
        try (PreparedStatement apply = connection.prepareStatement(callSql)) {
            apply.setArray(1, connection.unwrap(PgConnection.class).createArrayOf("text", rows.ids));
            try (ResultSet counts = apply.executeQuery()) {
                counts.next();
                long calls = counts.getLong(1);
                long stored = counts.getLong(2);
                if (stored != calls) {
                    // a trigger that cancels the update or a row-level security policy that hides the row:
                    // the function ran and its changes would commit with no result to say so, and the
                    // effect would run again at the next try
                    throw new SQLException("the effect function ran for " + calls + " rows of " + table
                            + " but only " + stored + " of them took its result: a trigger or a row-level security"
                            + " policy on " + table + " stops the sink's UPDATE. Remove it.", "XX000");
                }
                long rejected = counts.getLong(3);
                metrics.effectsApplied.inc(stored - rejected);
                metrics.effectsRejected.inc(rejected);
            }
        }
    }

    /** The effect (or its keys) raised an error about the message {@code id}: its result says so. */
    void recordFailure(Connection connection, String id, SQLException failure) throws SQLException {
        String error = RowIsolation.describe(failure);
        try (PreparedStatement update = connection.prepareStatement(markFailedSql)) {
            update.setString(1, failure.getSQLState());
            update.setString(2, error);
            update.setString(3, id);
            update.executeUpdate();
        }
        metrics.effectsFailed.inc();
        LOG.warn("The effect function failed on message id '{}' with SQLSTATE {}: {}. Its result records the failure;"
                + " the message is consumed and not retried (re-drive it once the cause is fixed: bin/onceflow"
                + " effects retry-failed).", id, failure.getSQLState(), error);
    }
}
