package io.onceflow.sink.postgres.internal;

import io.onceflow.api.Event;
import java.io.IOException;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.List;
import java.util.OptionalLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The claim of one writer attempt on its subtask indices, as one state machine: it fences attempts
 * from each other in the database, so that an attempt that looks dead to Flink but is only paused
 * (GC, frozen VM, SIGSTOP) or cut off cannot, when it wakes up, roll back its successor's
 * transactions or prepare one after its successor's recovery.
 *
 * <pre>
 *   HOLDING --first barrier: claim, recover, hand the held events on--> CLAIMED
 *   HOLDING, CLAIMED --a newer attempt claimed (StaleWriterException)--> FENCED
 *   HOLDING, CLAIMED --the claim or a prepareCommit failed otherwise--> FAILED
 *   any --close--> CLOSED
 * </pre>
 *
 * <ul>
 *   <li><b>One rule: claims happen at checkpoint barriers.</b> In HOLDING the attempt touches
 *       nothing of its indices (no rollback, no write): events go to {@link HeldEvents}. At its first
 *       checkpoint barrier it claims each subtask index it covers with its {@link ClaimToken} (run,
 *       barrier id: ordered as Flink's attempts are, whenever each reaches the database), under the
 *       index's row lock ({@link IndexClaims}). A claimant finding a newer claim is a zombie and
 *       stops; a zombie of a dead JobManager that never receives a barrier never claims.
 *   <li><b>Who may act on an index:</b> the holder of its session-level advisory lock
 *       ({@link AdvisoryLocks}), taken at the claim and held on the writer's one connection for its
 *       whole life. Recovery ({@code ROLLBACK PREPARED}) and {@code PREPARE TRANSACTION} only ever
 *       run on that connection, after the claim; a successor ends the holder's session
 *       ({@code pg_terminate_backend}) before it recovers, and the writer never reconnects.
 *   <li><b>Runs:</b> at start and before claiming, the attempt checks that its run is still the
 *       newest of the prefix ({@link SinkRuns}): a woken attempt of a replaced job stops there.
 *   <li><b>Lease:</b> {@link LeaseKeeper} keeps the session from looking idle, so that a run's start
 *       can tell another live job from a dead one.
 * </ul>
 *
 * <p>FENCED and FAILED are final: Flink fails the task, and the attempt writes, prepares and
 * recovers nothing more.
 */
final class WriterClaim implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(WriterClaim.class);

    enum State { HOLDING, CLAIMED, FENCED, FAILED, CLOSED }

    private final PostgresSinkConfig config;
    private final Connection connection;
    private final WriterStart start;
    private final long epoch;
    private final FenceHooks hooks;
    private final AdvisoryLocks locks;
    private final LeaseKeeper leaseKeeper;
    private final HeldEvents held;
    private final PostgresSinkMetrics metrics;
    private final String writerName;
    /** The server changed since the run was registered (see {@code ServerChange}): reconcile. */
    private final boolean serverChanged;
    private State state = State.HOLDING;

    private WriterClaim(PostgresSinkConfig config, Connection connection, WriterStart start, long epoch,
            FenceHooks hooks, HeldEvents held, PostgresSinkMetrics metrics, String writerName, boolean serverChanged) {
        this.config = config;
        this.connection = connection;
        this.start = start;
        this.epoch = epoch;
        this.hooks = hooks;
        this.locks = new AdvisoryLocks(connection, config.sinkPrefix());
        this.held = held;
        this.metrics = metrics;
        this.writerName = writerName;
        this.serverChanged = serverChanged;
        this.leaseKeeper = new LeaseKeeper(connection, config.writer().writerLease(), hooks);
    }

    /**
     * Checks the run, takes a new epoch and starts renewing the lease, in HOLDING; takes over
     * {@code held}, which may already hold restored events. Claims nothing: that waits for the first
     * checkpoint barrier ({@link #claimAtBarrier}).
     *
     * @param connection in autocommit mode, the writer's only connection
     * @throws StaleWriterException if a newer run owns the prefix
     */
    static WriterClaim open(PostgresSinkConfig config, Connection connection, WriterStart start, HeldEvents held,
            PostgresSinkMetrics metrics, String writerName, boolean serverChanged) throws SQLException {
        long epoch = newEpoch(connection);
        FenceHooks hooks = new FenceHooks(config.hooks(), config.sinkPrefix(), epoch, start.subtaskIndex());
        hooks.reached(ProtocolHooks.Step.FENCE_OPENING);
        SinkRuns.requireNewestRun(connection, config);
        return new WriterClaim(config, connection, start, epoch, hooks, held, metrics, writerName, serverChanged);
    }

    /** The server's 64-bit id of a new transaction: never issued twice by one server, and ordered. */
    private static long newEpoch(Connection connection) throws SQLException {
        try (Statement statement = connection.createStatement();
                ResultSet result = statement.executeQuery("SELECT pg_current_xact_id()::text::bigint")) {
            result.next();
            return result.getLong(1);
        }
    }

    /** This attempt's epoch, which its transactions' gids carry. */
    long epoch() {
        return epoch;
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
        held.add(event);
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
            SinkRuns.requireNewestRun(connection, config);
            IndexClaims claims = new IndexClaims(config, connection, start.tokenAt(config.run(), barrier), epoch,
                    start.jobId(), locks, hooks, metrics.olderAttemptsFenced);
            List<TransactionId> covered = claims.claimAtBarrier(start);
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
    static boolean reportIfRefused(Throwable failure, PostgresSinkMetrics metrics, String writerName) {
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
            leaseKeeper.close();
        }
    }

    /**
     * Releases the indices' locks before the writer closes its connection: the server ends a closed
     * session asynchronously, and its locks would otherwise look held (by a live writer) for a moment
     * after the job stopped. Best effort: a broken connection releases them anyway.
     */
    void releaseLocks() {
        try {
            locks.releaseAll();
        } catch (SQLException | RuntimeException e) {
            LOG.debug("{} could not release its locks before closing", writerName, e);
        }
    }
}
