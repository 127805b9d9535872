package io.onceflow.sink.postgres.internal.commit;

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
 * Internal. Calls the {@link EffectFunction} for rows of the events table and stores each result in
 * the row: one statement for all of them, under a savepoint, split in halves on an error about the
 * data until the failing rows stand alone (the same loop as for refused rows, {@link RowIsolation});
 * each of those gets the result {@code {"status":"failed","sqlstate":...,"error":...}}.
 *
 * <p>The caller must make sure that the rows are its own for the statement: inserted by its own
 * transaction, or locked by it ({@code FOR UPDATE}) in an earlier statement, so that no concurrent
 * change makes PostgreSQL re-evaluate a row (read committed's recheck of an updated row evaluates
 * the SET list again, which would call the function twice).
 */
@Internal
public final class EffectCalls {
    private static final Logger LOG = LoggerFactory.getLogger(EffectCalls.class);

    private final String table;
    private final String serializeSql;
    private final String callSql;
    private final String markFailedSql;
    private final PostgresSinkMetrics metrics;

    public EffectCalls(EventsTable events, String effectFunction, PostgresSinkMetrics metrics) {
        this.table = events.name();
        SqlIdentifiers.requireFunctionName("effect function", effectFunction);
        // One transaction of effects at a time per events table: concurrent batches (the committers
        // of all subtasks get the same checkpoint's notification at once) change shared rows in
        // unrelated orders and would deadlock at nearly every checkpoint. The wait is bounded by
        // lock_timeout, and the lock goes with the transaction.
        this.serializeSql = "SELECT pg_advisory_xact_lock(hashtext('onceflow effects of ' || ?))";
        this.callSql = events.callEffectStatement(effectFunction);
        this.markFailedSql = events.markEffectFailedStatement();
        this.metrics = metrics;
    }

    /**
     * Takes the lock that serialises the effect transactions of the events table. Call it first in
     * the transaction, before locking any row.
     */
    public void serialize(Connection connection) throws SQLException {
        try (PreparedStatement lock = connection.prepareStatement(serializeSql)) {
            lock.setString(1, table);
            lock.execute();
        }
    }

    /**
     * Calls the effect for the rows of {@code rows}' ids, in {@code connection}'s open transaction,
     * after {@link #serialize}.
     */
    public void call(Connection connection, Rows rows) throws SQLException {
        RowIsolation.isolatingFailingRows(connection, rows, this::callOnce, EffectCalls::isAboutTheRows,
                this::recordFailure);
    }

    private void callOnce(Connection connection, Rows rows) throws SQLException {
        try (PreparedStatement apply = connection.prepareStatement(callSql)) {
            apply.setArray(1, connection.unwrap(PgConnection.class).createArrayOf("text", rows.ids));
            try (ResultSet counts = apply.executeQuery()) {
                counts.next();
                long called = counts.getLong(1);
                if (called != rows.size()) {
                    // a trigger that cancels the update or a row-level security policy that hides the row:
                    // the function ran and its changes would commit with no result to say so, and the
                    // effect would run again at the next try
                    throw new SQLException("the effect function ran for " + rows.size() + " rows of " + table
                            + " but only " + called + " of them took its result: a trigger or a row-level security"
                            + " policy on " + table + " stops the sink's UPDATE. Remove it.", "XX000");
                }
                long rejected = counts.getLong(2);
                metrics.effectsApplied.inc(called - rejected);
                metrics.effectsRejected.inc(rejected);
            }
        }
    }

    /**
     * Whether an error of the function's is about the messages it was called for, so that the batch
     * is split until the failing ones stand alone and are marked failed: the data errors of
     * {@link RowIsolation#isRowDataError}, and 21 (a subquery that returns more rows for this
     * payload), 27 (the function changed a row the statement changes), 0A (a feature this input
     * needs), 57014 (this message's call outlasts {@code statement_timeout}). Not: connection,
     * serialization, deadlock and lock errors (tried again), nor 42 (a missing table, column or
     * privilege: a configuration mistake that would otherwise mark every message failed).
     */
    public static boolean isAboutTheRows(SQLException e) {
        String state = e.getSQLState();
        if (RowIsolation.isRowDataError(e) || "57014".equals(state)) {
            return true;
        }
        return state != null && (state.startsWith("21") || state.startsWith("27") || state.startsWith("0A"));
    }

    /** The effect raised a data error on the only row of {@code rows}: its result says so. */
    private void recordFailure(Connection connection, Rows rows, SQLException failure) throws SQLException {
        final int only = 0;
        String error = RowIsolation.describe(failure);
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
