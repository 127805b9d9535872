package io.onceflow.sink.postgres.internal;

import io.onceflow.api.Event;
import java.io.IOException;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The claim of one writer attempt on its subtask indices, as one state machine that owns the fence
 * ({@link WriterFence}), the recovery at the first checkpoint barrier and the events held until it:
 *
 * <pre>
 *   HOLDING --first barrier: claim, recover, hand the held events on--> CLAIMED
 *   HOLDING, CLAIMED --a newer attempt claimed (StaleWriterException)--> FENCED
 *   HOLDING, CLAIMED --the claim or a prepareCommit failed otherwise--> FAILED
 *   any --close--> CLOSED
 * </pre>
 *
 * <p>In HOLDING the attempt touches nothing of its indices: events go to {@link HeldEvents}. Only the
 * barrier's claim rolls anything back, so a zombie that never claims, or claims too late, cannot roll
 * back a successor's transactions. FENCED and FAILED are final: Flink fails the task, and the attempt
 * writes, prepares and recovers nothing more.
 */
final class WriterClaim implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(WriterClaim.class);

    enum State { HOLDING, CLAIMED, FENCED, FAILED, CLOSED }

    private final Connection connection;
    private final WriterFence fence;
    private final WriterStart start;
    private final HeldEvents held;
    private final PostgresSinkMetrics metrics;
    private final String writerName;
    /** The server changed since the run was registered (see {@code ServerChange}): reconcile. */
    private final boolean serverChanged;
    private State state = State.HOLDING;

    /** Takes over {@code held}, which may already hold restored events. */
    WriterClaim(Connection connection, WriterFence fence, WriterStart start, HeldEvents held,
            PostgresSinkMetrics metrics, String writerName, boolean serverChanged) {
        this.connection = connection;
        this.fence = fence;
        this.start = start;
        this.held = held;
        this.metrics = metrics;
        this.writerName = writerName;
        this.serverChanged = serverChanged;
    }

    State state() {
        return state;
    }

    boolean isHolding() {
        return state == State.HOLDING;
    }

    boolean hasNothingHeld() {
        return held.isEmpty();
    }

    /** In HOLDING, holds {@code event} and says so; in CLAIMED, says the caller writes it. */
    boolean hold(Event event) throws IOException {
        if (state == State.CLAIMED) {
            return false;
        }
        requireState(State.HOLDING, "hold an event");
        if (held.add(event)) {
            metrics.eventsSpilledBeforeBarrier.inc();
        }
        return true;
    }

    /**
     * HOLDING to CLAIMED at checkpoint {@code barrier}: claims this attempt's indices, rolls back the
     * abandoned prepared transactions of the indices it now holds, leaves autocommit for the first
     * transaction, then hands the held events to {@code write} in arrival order. After a change of
     * server it reconciles instead of trusting the restored horizon (see
     * {@link PreparedTransactionRecovery}): it rolls back later checkpoints only, commits the
     * completed ones it can tell, and refuses on those it cannot.
     */
    void claimAtBarrier(long barrier, HeldEvents.EventConsumer write) throws IOException {
        requireState(State.HOLDING, "claim at barrier " + barrier);
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
            failed(e);
            throw new IOException(writerName + " could not claim its indices at checkpoint barrier " + barrier + ": "
                    + e.getMessage(), e);
        }
        state = State.CLAIMED;
        held.forEach(write);
    }

    /** The attempt is over because of {@code failure}: FENCED if a newer attempt claimed, else FAILED. */
    void failed(Exception failure) {
        if (state == State.HOLDING || state == State.CLAIMED) {
            state = reportIfRefused(failure, metrics, writerName) ? State.FENCED : State.FAILED;
        }
    }

    /**
     * Whether {@code failure} is the fence refusing a stale attempt; if so, says it where operators
     * look (docs/failover.md, "What a woken zombie logs"): the fence did its job.
     */
    static boolean reportIfRefused(Exception failure, PostgresSinkMetrics metrics, String writerName) {
        if (!(failure instanceof StaleWriterException)) {
            return false;
        }
        metrics.staleWriterAttemptsRefused.inc();
        LOG.warn("{}: stale writer attempt refused, nothing touched: {}", writerName, failure.getMessage());
        return true;
    }

    private void requireState(State expected, String action) {
        if (state != expected) {
            throw new IllegalStateException(writerName + " cannot " + action + " in state " + state);
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

    /**
     * Drops what is held and stops the lease; the locks stay until {@link #releaseLocks} (the
     * writer's statements still run on the connection).
     */
    @Override
    public void close() {
        if (state == State.HOLDING) { // what a zombie that never got a barrier logs
            LOG.info("{} closed before its first checkpoint barrier: it claimed and touched nothing; its {} held"
                    + " events are replayed from the restored checkpoint", writerName, held.size());
        }
        state = State.CLOSED;
        try {
            held.close();
        } finally {
            fence.close();
        }
    }

    /** See {@link WriterFence#releaseLocks}. */
    void releaseLocks() {
        fence.releaseLocks();
    }
}
