package io.onceflow.sink.postgres.internal;

import io.onceflow.sink.postgres.options.SqlIdentifiers;
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
 * (source order): one statement for all of them, under a savepoint, split in halves on an error
 * about one message's data until the failing rows stand alone (the same loop as for refused rows,
 * {@link RowIsolation}); each of those is recorded as failed. Any other error is about the
 * environment ({@link EffectFailures}) and rolls the whole transaction back, to be tried again.
 *
 * <p>The calls read the events rows without locking them; the results are stored afterwards in one
 * statement ({@link #store}), which locks the rows without waiting. So a writer's upsert of a
 * redelivered id never waits for effects being called, and the effect transaction never waits, with
 * its keys held, for a writer's transaction (which may be prepared and wait for a checkpoint).
 * Each effect happens once because its queue row, locked by the caller, leaves the queue in the
 * same transaction ({@link EffectBatch}).
 */
@Internal
final class EffectCalls {
    private static final Logger LOG = LoggerFactory.getLogger(EffectCalls.class);

    private final String table;
    private final String callSql;
    private final String lockForResultsSql;
    private final String storeSql;
    /** Null unless outcomes are recorded for a results topic. */
    private final String recordOutcomesSql;
    private final String sinkPrefix;
    private final PostgresSinkMetrics metrics;

    /**
     * @param sinkPrefix the sink a failure is recorded for: only its re-drive queues it again
     * @param recordOutcomes whether {@link #store} also records each outcome for the results topic
     */
    public EffectCalls(EventsTable events, String sinkPrefix, String effectFunction, boolean recordOutcomes,
            PostgresSinkMetrics metrics) {
        this.sinkPrefix = sinkPrefix;
        this.table = events.name();
        SqlIdentifiers.requireFunctionName("effect function", effectFunction);
        this.callSql = events.callEffectStatement(effectFunction);
        this.lockForResultsSql = events.lockForResultsStatement();
        this.storeSql = events.storeResultsStatement();
        this.recordOutcomesSql = recordOutcomes ? events.outcomes().recordStatement() : null;
        this.metrics = metrics;
    }

    /** Calls the effect for the rows of {@code rows}' ids, in that order, adding what it decided to {@code outcomes}. */
    void call(Connection connection, Rows rows, EffectOutcomes outcomes) throws SQLException {
        RowIsolation.isolatingFailingRows(connection, rows, (c, some) -> callOnce(c, some, outcomes),
                SqlStates::isAboutTheMessage, (c, row, failure) -> outcomes.failure(row.ids[0], failure));
    }

    private void callOnce(Connection connection, Rows rows, EffectOutcomes outcomes) throws SQLException {
        try (PreparedStatement apply = connection.prepareStatement(callSql)) {
            apply.setArray(1, connection.unwrap(PgConnection.class).createArrayOf("text", rows.ids));
            try (ResultSet results = apply.executeQuery()) {
                while (results.next()) {
                    outcomes.result(results.getString(1), results.getString(2));
                }
            }
        }
    }

    /**
     * Stores {@code outcomes} in the events rows, in the open transaction, and counts them; records
     * them for the results topic too, if there is one, numbered in offset order: the caller holds
     * their partition's lock.
     */
    void store(Connection connection, EffectOutcomes outcomes) throws SQLException {
        if (outcomes.isEmpty()) {
            return;
        }
        PgConnection pg = connection.unwrap(PgConnection.class);
        try (PreparedStatement lock = connection.prepareStatement(lockForResultsSql)) {
            lock.setArray(1, pg.createArrayOf("text", outcomes.ids.toArray()));
            lock.executeQuery().close();
        }
        long stored = 0;
        long rejected = 0;
        try (PreparedStatement store = connection.prepareStatement(storeSql)) {
            store.setArray(1, pg.createArrayOf("text", outcomes.ids.toArray()));
            store.setArray(2, pg.createArrayOf("text", outcomes.results.toArray()));
            store.setArray(3, pg.createArrayOf("text", outcomes.sqlStates.toArray()));
            store.setArray(4, pg.createArrayOf("text", outcomes.errors.toArray()));
            store.setString(5, sinkPrefix);
            try (ResultSet statuses = store.executeQuery()) {
                while (statuses.next()) {
                    stored++;
                    rejected += EffectFunction.REJECTED.equals(statuses.getString(1)) ? 1 : 0;
                }
            }
        }
        if (stored != outcomes.ids.size()) {
            // a trigger that cancels the update or a row-level security policy that hides the row: the
            // function ran and its changes would commit with no result to say so, and run again later
            throw new SQLException("the effect function ran for " + outcomes.ids.size() + " rows of " + table
                    + " but only " + stored + " of them took its result: a trigger or a row-level security"
                    + " policy on " + table + " stops the sink's UPDATE. Remove it.", "XX000");
        }
        if (recordOutcomesSql != null) {
            try (PreparedStatement record = connection.prepareStatement(recordOutcomesSql)) {
                record.setString(1, sinkPrefix);
                record.setArray(2, pg.createArrayOf("text", outcomes.ids.toArray()));
                record.executeUpdate();
            }
        }
        int failed = outcomes.failures();
        metrics.effectsApplied.inc(stored - rejected - failed);
        metrics.effectsRejected.inc(rejected);
        metrics.effectsFailed.inc(failed);
        for (int i = 0; i < outcomes.ids.size(); i++) {
            if (outcomes.sqlStates.get(i) != null) {
                LOG.warn("The effect function failed on message id '{}' with SQLSTATE {}: {}. Its result records the"
                        + " failure; it stays queued, marked failed, and is not retried until an operator re-drives it"
                        + " once the cause is fixed (bin/onceflow effects retry-failed) or skips it (effects skip).",
                        outcomes.ids.get(i), outcomes.sqlStates.get(i), outcomes.errors.get(i));
            }
        }
    }
}
