package io.onceflow.sink.postgres.internal;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;
import java.util.function.Predicate;
import org.apache.flink.annotation.Internal;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Internal. Rolls back the prepared transactions that a failed or earlier attempt of this sink left
 * behind, before a writer writes anything: they will never be committed, and they hold row locks
 * that the replayed writes need.
 *
 * <p>A prepared transaction of this sink prefix (in this database) is abandoned if
 *
 * <ul>
 *   <li>there is no restored checkpoint (a fresh start: no committable can refer to it), or
 *   <li>its checkpoint id is greater than the restored checkpoint id (that checkpoint never
 *       completed, its rows will be replayed), or
 *   <li>its epoch is at or above the restored checkpoint's horizon ({@link PostgresWriterState}):
 *       a writer that started after that checkpoint prepared it, e.g. another branch of the job
 *       started from an older savepoint, so it cannot be among the restored committables.
 * </ul>
 *
 * <p>The others are in the restored committables and left to the committer. A writer only rolls
 * back transactions of the subtask indices it holds ({@link WriterClaim}): its own, and the old
 * indices congruent to its own modulo the parallelism, so that together the subtasks cover every
 * old index after any rescaling (2 -> 3 -> 1), and a zombie can never reach them.
 *
 * <p>After a change of server ({@link ServerChange}: a failover to a replica that was behind, a
 * restored copy) a transaction of a completed checkpoint may be prepared again though its commit was
 * acknowledged before: no restored committable refers to it, and its epoch may come from a history
 * that the server which read the restored horizon never had, so the horizon rules out nothing.
 * Then only later checkpoints are rolled back, {@link #commitCompleted} commits the transactions of
 * checkpoints up to the restored one whose epoch is below the horizon, and
 * {@link #refuseUndecidable} leaves the others to an operator: each is either another branch of
 * the job (roll it back) or a completed checkpoint (commit it).
 */
@Internal
public final class PreparedTransactionRecovery {
    private static final Logger LOG = LoggerFactory.getLogger(PreparedTransactionRecovery.class);

    private PreparedTransactionRecovery() {}

    /** The prepared transactions of {@code sinkPrefix} in this database. */
    public static List<TransactionId> prepared(Connection connection, String sinkPrefix) throws SQLException {
        List<TransactionId> prepared = new ArrayList<>();
        try (Statement statement = connection.createStatement();
                ResultSet gids = statement.executeQuery(
                        "SELECT gid FROM pg_prepared_xacts WHERE database = current_database()")) {
            while (gids.next()) {
                TransactionId.parse(gids.getString(1), sinkPrefix).ifPresent(prepared::add);
            }
        }
        return prepared;
    }

    /**
     * @param connection in autocommit mode (ROLLBACK PREPARED cannot run inside a transaction),
     *     holding the fence of every index in {@code candidates}
     * @param candidates prepared transactions of indices this writer holds
     * @return the gids rolled back
     */
    public static List<TransactionId> rollBackAbandoned(Connection connection, List<TransactionId> candidates,
            OptionalLong restoredCheckpointId, OptionalLong restoredHorizon, String writerName) throws SQLException {
        List<TransactionId> rolledBack = finishEach(connection, candidates,
                id -> isAbandoned(id, restoredCheckpointId, restoredHorizon), "ROLLBACK", "roll back");
        if (!rolledBack.isEmpty()) {
            LOG.info("{} rolled back {} abandoned prepared transactions (restored checkpoint: {}, horizon: {}): {}",
                    writerName, rolledBack.size(),
                    restoredCheckpointId.isPresent() ? restoredCheckpointId.getAsLong() : "none",
                    restoredHorizon.isPresent() ? restoredHorizon.getAsLong() : "unknown", rolledBack);
        }
        return rolledBack;
    }

    /**
     * Commits the candidates of checkpoints the restored state says completed (checkpoint id at most
     * {@code restoredCheckpointId}): for a writer that found the server changed, after
     * {@link #refuseUndecidable} passed.
     *
     * @param connection as for {@link #rollBackAbandoned}
     * @return the gids committed
     */
    public static List<TransactionId> commitCompleted(Connection connection, List<TransactionId> candidates,
            OptionalLong restoredCheckpointId, String writerName) throws SQLException {
        if (restoredCheckpointId.isEmpty()) {
            return List.of();
        }
        List<TransactionId> committed = finishEach(connection, candidates,
                id -> id.checkpointId() <= restoredCheckpointId.getAsLong(), "COMMIT", "commit");
        if (!committed.isEmpty()) {
            LOG.warn("{} committed {} prepared transactions of checkpoints up to restored checkpoint {} that the"
                    + " server had back after it changed (their commit was acknowledged before): {}", writerName,
                    committed.size(), restoredCheckpointId.getAsLong(), committed);
        }
        return committed;
    }

    /**
     * After a change of server, refuses while a candidate of a checkpoint up to the restored one has
     * an epoch at or above the restored horizon: a writer started after the restored checkpoint
     * prepared it, on this server's history or on one the horizon's server never had. It is another
     * branch of the job (started from an older savepoint, cancelled) or a checkpoint this job
     * completed before the failover, and either guess can be wrong: committing a branch exposes what
     * the restored checkpoint replays, rolling back a completed checkpoint loses it.
     *
     * @throws IllegalStateException naming each such transaction and what to run for it
     */
    public static void refuseUndecidable(List<TransactionId> candidates, OptionalLong restoredCheckpointId,
            OptionalLong restoredHorizon, String writerName) {
        if (restoredCheckpointId.isEmpty() || restoredHorizon.isEmpty()) {
            return;
        }
        List<TransactionId> undecidable = candidates.stream()
                .filter(id -> id.checkpointId() <= restoredCheckpointId.getAsLong()
                        && id.epoch() >= restoredHorizon.getAsLong())
                .toList();
        if (undecidable.isEmpty()) {
            return;
        }
        throw new IllegalStateException(writerName + ": the PostgreSQL server changed since this run was registered,"
                + " and it has prepared transactions of checkpoints up to restored checkpoint "
                + restoredCheckpointId.getAsLong() + " that writers started after that checkpoint's horizon ("
                + restoredHorizon.getAsLong() + ") prepared: " + undecidable + ". Each is either another branch of"
                + " this sink prefix (a job started from an older savepoint: roll it back) or a checkpoint this job"
                + " completed on a server whose history the restored checkpoint did not see (commit it); onceflow"
                + " cannot tell which, and a wrong guess exposes or loses rows. For each, as the database role that"
                + " prepared it (pg_prepared_xacts.owner), run ROLLBACK PREPARED '<gid>' or COMMIT PREPARED '<gid>'"
                + " (docs/failover.md, \"Transactions a reconciliation cannot decide\"). The job restarts until"
                + " then, and goes on by itself once none is left.");
    }

    /**
     * Runs {@code <verb> PREPARED} for each candidate that {@code chosen} accepts.
     *
     * @return those finished here (not those another session finished in the meantime)
     */
    private static List<TransactionId> finishEach(Connection connection, List<TransactionId> candidates,
            Predicate<TransactionId> chosen, String verb, String action) throws SQLException {
        List<TransactionId> finished = new ArrayList<>();
        try (Statement statement = connection.createStatement()) {
            for (TransactionId id : candidates) {
                if (!chosen.test(id)) {
                    continue;
                }
                try {
                    statement.execute(verb + " PREPARED '" + id.encode() + "'");
                    finished.add(id);
                } catch (SQLException e) {
                    if (SqlStates.is(e, SqlStates.INSUFFICIENT_PRIVILEGE)) {
                        throw wrongRole(connection, id, action, e);
                    }
                    if (!SqlStates.is(e, SqlStates.UNDEFINED_OBJECT)) {
                        throw e;
                    }
                    // Gone in the meantime (committed by a restored committable's committer): nothing to do.
                }
            }
        }
        return finished;
    }

    public static boolean isAbandoned(TransactionId id, OptionalLong restoredCheckpointId, OptionalLong restoredHorizon) {
        return restoredCheckpointId.isEmpty()
                || id.checkpointId() > restoredCheckpointId.getAsLong()
                || (restoredHorizon.isPresent() && id.epoch() >= restoredHorizon.getAsLong());
    }

    /**
     * PostgreSQL lets only the role that prepared a transaction (or a superuser) finish it: after a
     * change of role across a restore, say which role owns it.
     */
    public static SQLException wrongRole(Connection connection, TransactionId id, String action, SQLException cause) {
        String owner = "unknown";
        try (PreparedStatement query = connection.prepareStatement("SELECT owner FROM pg_prepared_xacts WHERE gid = ?")) {
            query.setString(1, id.encode());
            try (ResultSet row = query.executeQuery()) {
                if (row.next()) {
                    owner = row.getString(1);
                }
            }
        } catch (SQLException e) {
            cause.addSuppressed(e);
        }
        return new SQLException("cannot " + action + " prepared transaction " + id + ": it belongs to database role '"
                + owner + "', and PostgreSQL lets only that role (or a superuser) finish it. Run the job as '" + owner
                + "' (postgres.user) until its prepared transactions are committed, then switch roles.",
                SqlStates.INSUFFICIENT_PRIVILEGE, cause);
    }
}
