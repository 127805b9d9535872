package io.onceflow.sink.postgres;

import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;
import org.apache.flink.annotation.Internal;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Internal. Rolls back the prepared transactions that a failed or earlier attempt of this sink left
 * behind, before a writer writes anything: they will never be committed, and they hold row locks
 * that the replayed writes need.
 *
 * <p>A prepared transaction of this sink prefix (in this database) is abandoned if its checkpoint id
 * is greater than the restored checkpoint id (that checkpoint never completed, its rows will be
 * replayed), or if there is no restored checkpoint at all (a fresh start: no committable can refer
 * to it). Those with a checkpoint id up to the restored one are in the restored committables and
 * left to the committer.
 *
 * <p>Every writer subtask recovers the gids whose subtask index is congruent to its own modulo the
 * current parallelism. Together the subtasks cover every old index after any rescaling (2 -> 3 -> 1),
 * and a subtask that restarts alone (region failover of an embarrassingly parallel job) never rolls
 * back the fresh transaction of a subtask that kept running.
 */
@Internal
final class PreparedTransactionRecovery {
    private static final Logger LOG = LoggerFactory.getLogger(PreparedTransactionRecovery.class);
    /** SQLSTATE undefined_object: "prepared transaction with identifier ... does not exist". */
    static final String UNDEFINED_OBJECT = "42704";

    private PreparedTransactionRecovery() {}

    /**
     * @param connection in autocommit mode (ROLLBACK PREPARED cannot run inside a transaction)
     * @return the gids rolled back
     */
    static List<TransactionId> rollBackAbandoned(Connection connection, String sinkPrefix,
            OptionalLong restoredCheckpointId, int subtaskIndex, int parallelism) throws SQLException {
        List<TransactionId> abandoned = new ArrayList<>();
        try (Statement statement = connection.createStatement();
                ResultSet gids = statement.executeQuery(
                        "SELECT gid FROM pg_prepared_xacts WHERE database = current_database()")) {
            while (gids.next()) {
                TransactionId.parse(gids.getString(1), sinkPrefix)
                        .filter(id -> isAbandoned(id, restoredCheckpointId, subtaskIndex, parallelism))
                        .ifPresent(abandoned::add);
            }
        }
        List<TransactionId> rolledBack = new ArrayList<>();
        try (Statement statement = connection.createStatement()) {
            for (TransactionId id : abandoned) {
                try {
                    statement.execute("ROLLBACK PREPARED '" + id.encode() + "'");
                    rolledBack.add(id);
                } catch (SQLException e) {
                    if (!UNDEFINED_OBJECT.equals(e.getSQLState())) {
                        throw e;
                    }
                    // Gone in the meantime (another attempt's recovery): nothing left to do.
                }
            }
        }
        if (!rolledBack.isEmpty()) {
            LOG.info("Subtask {}/{} of sink '{}' rolled back {} abandoned prepared transactions (restored checkpoint:"
                    + " {}): {}", subtaskIndex, parallelism, sinkPrefix, rolledBack.size(),
                    restoredCheckpointId.isPresent() ? restoredCheckpointId.getAsLong() : "none", rolledBack);
        }
        return rolledBack;
    }

    static boolean isAbandoned(TransactionId id, OptionalLong restoredCheckpointId, int subtaskIndex,
            int parallelism) {
        boolean recoveredHere = id.subtaskIndex() % parallelism == subtaskIndex;
        boolean neverCompleted = restoredCheckpointId.isEmpty() || id.checkpointId() > restoredCheckpointId.getAsLong();
        return recoveredHere && neverCompleted;
    }
}
