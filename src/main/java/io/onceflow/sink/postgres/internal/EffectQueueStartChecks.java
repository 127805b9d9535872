package io.onceflow.sink.postgres.internal;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import org.apache.flink.annotation.Internal;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Internal. What a sink's start checks and migrates about the effect queue ({@link PendingEffectsTable}), for
 * {@link PostgresSchema#prepare}: no start may strand queued effects, and an events table of an
 * earlier version gives up its index of pending effects.
 */
@Internal
final class EffectQueueStartChecks {
    private static final Logger LOG = LoggerFactory.getLogger(EffectQueueStartChecks.class);
    private static final Duration LEGACY_INDEX_LOCK_WAIT = Duration.ofMillis(200);

    private EffectQueueStartChecks() {}

    /**
     * Refuses a start without an effect function while effects are queued: nothing would call them,
     * and their messages would stay consumed with no effect; nor could failed ones be re-driven, and
     * their gauge and alert would go with the workers.
     */
    static void refuseStrandedEffects(Connection connection, PendingEffectsTable queue) throws SQLException {
        long queued = count(connection, queue.countQuery());
        if (count(connection, queue.queuedByPreparedTransactionsQuery()) > 0) {
            throw new IllegalStateException("a prepared transaction (of a checkpoint this start may restore and"
                    + " commit) queued effects in " + queue.name() + ", and this start has no effect function"
                    + " (postgres.effect.function) to apply them: start with the effect function they were written"
                    + " for, let the queue drain (docs/effects.md, \"Backlog\"), then change it");
        }
        if (queued > 0) {
            throw new IllegalStateException(queued + " effects are still queued in " + queue.name()
                    + " (messages consumed whose effect was not applied yet, or failed and waiting for an operator to"
                    + " re-drive or skip them), and this start has no effect function"
                    + " (postgres.effect.function) to call them: start with the effect function they were written"
                    + " for, let the queue drain (docs/effects.md, \"Backlog\"), then change it; or, to drop them"
                    + " on purpose, DELETE FROM " + queue.name());
        }
    }

    private static long count(Connection connection, String query) throws SQLException {
        try (PreparedStatement statement = connection.prepareStatement(query);
                ResultSet result = statement.executeQuery()) {
            result.next();
            return result.getLong(1);
        }
    }

    /**
     * An events table of an earlier version marks pending effects with a partial index, which makes
     * every result update non-HOT: queue its pending rows (and its failures, marked failed), then
     * drop the index. The earlier
     * version's prepared transactions (a restored checkpoint's, committed after this start) lock the
     * table: then the index stays until a later start, and the effect workers queue the rows those
     * transactions commit meanwhile (the index finds them).
     */
    static void migrateLegacyPendingIndex(Connection connection, EventsTable events, String sinkPrefix, String function)
            throws SQLException {
        PendingEffectsTable queue = events.queue();
        String legacy = queue.upgrade().legacyIndex();
        if (!hasLegacyIndex(connection, queue)) {
            return;
        }
        try {
            PostgresConnections.inTransaction(connection, () -> {
                try (Statement statement = connection.createStatement()) {
                    PostgresSchema.lockSchema(statement);
                    if (exists(connection, legacy)) {
                        queueLegacyPending(connection, queue, sinkPrefix, function);
                        statement.execute(queue.upgrade().queueLegacyFailuresStatement());
                        statement.execute(queue.upgrade().backfillTopicStatement());
                        // never wait behind a prepared transaction that only this job's committer ends
                        statement.execute("SET LOCAL lock_timeout = '" + LEGACY_INDEX_LOCK_WAIT.toMillis() + "ms'");
                        statement.execute("DROP INDEX " + legacy);
                    }
                }
            });
        } catch (SQLException e) {
            if (!SqlStates.is(e, SqlStates.LOCK_NOT_AVAILABLE)) {
                throw e;
            }
            LOG.info("The index {} of an earlier version stays until a later start: a transaction (maybe a prepared"
                    + " one of a restored checkpoint) holds a lock on {}", legacy, events.name());
        }
    }

    /**
     * Queues the rows an earlier version left waiting for their effect, bound to this sink and
     * function (it had neither: any sink on the table applied them).
     */
    public static void queueLegacyPending(Connection connection, PendingEffectsTable queue, String sinkPrefix,
            String function) throws SQLException {
        try (PreparedStatement statement = connection.prepareStatement(queue.upgrade().queueLegacyPendingStatement())) {
            statement.setString(1, sinkPrefix);
            statement.setString(2, function);
            statement.execute();
        }
    }

    /** Whether the events table still has the index of pending effects of an earlier version. */
    public static boolean hasLegacyIndex(Connection connection, PendingEffectsTable queue) throws SQLException {
        return exists(connection, queue.upgrade().legacyIndex());
    }

    static boolean exists(Connection connection, String relation) throws SQLException {
        try (PreparedStatement query = connection.prepareStatement("SELECT to_regclass(?) IS NOT NULL")) {
            query.setString(1, relation);
            try (ResultSet found = query.executeQuery()) {
                found.next();
                return found.getBoolean(1);
            }
        }
    }

}
