package io.onceflow.sink.postgres.internal;

import java.io.IOException;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The claim and recovery of a writer's indices at its first checkpoint barrier (see
 * {@link WriterFence}): claim its indices, claim the index of every prepared transaction it covers,
 * then roll back the abandoned ones. Nothing is rolled back before the claim, so a zombie that never
 * claims, or claims too late, cannot roll back a successor's transactions.
 */
final class ClaimRecovery {
    private static final Logger LOG = LoggerFactory.getLogger(ClaimRecovery.class);

    private final Connection connection;
    private final WriterFence fence;
    private final WriterStart start;
    private final PostgresSinkMetrics metrics;
    private final String writerName;
    /** The server changed since the run was registered (see {@code ServerChange}): reconcile. */
    private final boolean serverChanged;

    ClaimRecovery(Connection connection, WriterFence fence, WriterStart start, PostgresSinkMetrics metrics,
            String writerName, boolean serverChanged) {
        this.connection = connection;
        this.fence = fence;
        this.start = start;
        this.metrics = metrics;
        this.writerName = writerName;
        this.serverChanged = serverChanged;
    }

    /**
     * Claims at checkpoint {@code barrier}, rolls back the abandoned prepared transactions of the
     * indices this writer now holds, then leaves autocommit for the first transaction.
     *
     * <p>After a change of server the restored horizon no longer tells an abandoned transaction
     * from one of a completed checkpoint: a commit acknowledged before the failover may be undone
     * and the transaction back, prepared, with an epoch from a history the server that read the
     * horizon never had. So only later checkpoints are rolled back; those up to the restored one
     * are committed where their epoch is below the horizon, and where it is not, nothing is decided
     * and the writer refuses ({@link PreparedTransactionRecovery#refuseUndecidable}): an operator
     * commits or rolls each back.
     */
    void claimAtBarrier(long barrier) throws IOException {
        try {
            fence.claimAtBarrier(barrier);
            List<TransactionId> covered = claimPreparedOfCoveredIndices();
            OptionalLong horizon = start.restoredHorizon();
            List<TransactionId> rolledBack = PreparedTransactionRecovery.rollBackAbandoned(connection, covered,
                    start.restoredCheckpointId(), serverChanged ? OptionalLong.empty() : horizon, writerName);
            metrics.transactionsRolledBackOnRecovery.inc(rolledBack.size());
            if (serverChanged) {
                metrics.serverChangesSeen.inc();
                covered.removeAll(rolledBack);
                PreparedTransactionRecovery.refuseUndecidable(covered, start.restoredCheckpointId(), horizon,
                        writerName);
                metrics.transactionsCommittedOnRecovery.inc(PreparedTransactionRecovery.commitCompleted(connection,
                        covered, start.restoredCheckpointId(), writerName).size());
            }
            connection.setAutoCommit(false);
        } catch (SQLException | RuntimeException e) {
            reportIfRefused(e, metrics, writerName);
            throw new IOException(writerName + " could not claim its indices at checkpoint barrier " + barrier + ": "
                    + e.getMessage(), e);
        }
    }

    /**
     * When {@code failure} is the fence refusing a stale attempt, says so where operators look
     * (docs/failover.md, "What a woken zombie logs"): the fence did its job.
     */
    static void reportIfRefused(Exception failure, PostgresSinkMetrics metrics, String writerName) {
        if (failure instanceof StaleWriterException) {
            metrics.staleWriterAttemptsRefused.inc();
            LOG.warn("{}: stale writer attempt refused, nothing touched: {}", writerName, failure.getMessage());
        }
    }

    /**
     * Claims the index of every prepared transaction this subtask covers, until no new one shows up
     * (a fenced holder may have prepared one just before it was ended), and returns them.
     */
    private List<TransactionId> claimPreparedOfCoveredIndices() throws SQLException {
        while (true) {
            List<TransactionId> covered = new ArrayList<>();
            boolean claimedMore = false;
            for (TransactionId id : PreparedTransactionRecovery.prepared(connection, fence.sinkPrefix())) {
                if (start.covers(id.subtaskIndex())) {
                    claimedMore |= !fence.claimed().contains(id.subtaskIndex());
                    fence.claim(id.subtaskIndex());
                    covered.add(id);
                }
            }
            if (!claimedMore) {
                return covered;
            }
        }
    }
}
