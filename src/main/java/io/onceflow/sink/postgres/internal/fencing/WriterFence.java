package io.onceflow.sink.postgres.internal.fencing;

import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.ProtocolHooks;
import io.onceflow.sink.postgres.internal.writer.WriterStart;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Set;
import org.apache.flink.annotation.Internal;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Internal. Fences writer attempts from each other in the database, so that an attempt that looks
 * dead to Flink but is only paused (GC, frozen VM, SIGSTOP) or cut off cannot, when it wakes up,
 * roll back its successor's transactions or prepare one after its successor's recovery.
 *
 * <h2>Design</h2>
 *
 * <ul>
 *   <li><b>Who may act on an index:</b> every subtask index of a sink prefix has a session-level
 *       advisory lock ({@code pg_advisory_lock(key(prefix), index)}). A writer takes the lock of its
 *       own index, and of every old index it recovers after a rescale, before its recovery scan, and
 *       holds it on its one connection for its whole life. Recovery ({@code ROLLBACK PREPARED}) and
 *       {@code PREPARE TRANSACTION} only ever run on that connection.
 *   <li><b>How a successor fences its predecessor:</b> it terminates the holder's backend
 *       ({@code pg_terminate_backend}) and waits for the lock. PostgreSQL rolls back the holder's
 *       open (unprepared) transaction and drops the session; whatever the zombie sends afterwards
 *       fails, because the writer never reconnects. The successor's recovery scan runs only after
 *       the old backend is gone, so it sees every transaction the old one managed to prepare.
 *   <li><b>Who is the successor:</b> not whoever reaches the database last — a zombie that stalled
 *       before its first statement arrives after its successor, and attempt numbers restart at 0
 *       on a new JobManager. Each claim writes the claimant's {@link ClaimToken} (run, claim
 *       checkpoint: what Flink's checkpoint counter, kept across JobManagers, issued) into the
 *       writers table under a row lock, before taking the advisory lock. A claimant whose token is
 *       older than the recorded one refuses to touch anything ({@link ClaimToken.Verdict#STALE});
 *       one that cannot tell at start (the index was claimed with its restored checkpoint or later)
 *       defers: it terminates nobody, rolls back and writes nothing, and claims at its first
 *       checkpoint barrier, with that barrier's id ({@link #claimAtBarrier}). So the newest claimant
 *       always wins and the holder it terminates is always older; a zombie of a dead JobManager
 *       defers and, never receiving a barrier, never acts. Every index's row
 *       exists before anyone reads it {@code FOR UPDATE} (so two first claims cannot both read
 *       "unclaimed"), and the claim transaction is the only one whose idle time the server bounds
 *       (one lease): a claimant paused while it holds the row lock blocks its successor for a lease,
 *       not for the length of its pause.
 *   <li><b>Leases, for what tokens cannot order:</b> a writer renews its session's activity every
 *       third of {@code writerLease} (a query from a daemon thread that starts no transaction). A
 *       holder whose session has been idle longer than the lease is presumed dead or paused. Only
 *       {@link ClaimToken.Verdict#UNDECIDED} claims, and the check for another live job at
 *       {@link SinkRuns#start}, rely on it.
 *   <li><b>Runs:</b> before claiming, a writer checks that its run is still the newest of the
 *       prefix: a woken attempt of a job that was replaced by a new submission stops there.
 * </ul>
 *
 * <p>Each index's lock holder is identified by its {@code application_name}
 * ({@code onceflow-<prefix>-writer-<n>}): a holder with another name (a hash collision of two
 * prefixes' lock keys, or another application using the same advisory lock) is never terminated;
 * the writer fails and says so.
 *
 * <p>This class opens and closes the fence; the parts are {@link IndexClaims} (the claim protocol),
 * {@link AdvisoryLocks} and {@link LeaseKeeper}.
 */
@Internal
public final class WriterFence implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(WriterFence.class);

    private final PostgresSinkConfig config;
    private final Connection connection;
    private final WriterStart start;
    private final long epoch;
    private final AdvisoryLocks locks;
    private final FenceHooks hooks;
    private final PostgresSinkMetrics metrics;
    private final LeaseKeeper leaseKeeper;
    /** The current round of claims: immediate at start, then ordered at a barrier or the end of input. */
    private IndexClaims claims;
    private boolean deferred;

    private WriterFence(PostgresSinkConfig config, Connection connection, WriterStart start, long epoch,
            PostgresSinkMetrics metrics) {
        this.config = config;
        this.connection = connection;
        this.start = start;
        this.epoch = epoch;
        this.metrics = metrics;
        this.locks = new AdvisoryLocks(connection, config.sinkPrefix());
        this.hooks = new FenceHooks(config.sinkPrefix(), epoch, start.subtaskIndex());
        this.claims = round(start.token(config.run()), IndexClaims.Mode.IMMEDIATE);
        this.leaseKeeper = new LeaseKeeper(connection, config.writer().writerLease(), hooks);
    }

    /**
     * Checks the run, takes a new epoch, starts renewing the lease and claims, with the restored
     * checkpoint, the writer's own index and every index it covers that earlier writers recorded (so
     * that their zombies are fenced even where they left no transaction behind yet). If a claim
     * cannot be ordered yet, the fence {@linkplain #deferred() defers} instead, holding nothing.
     *
     * @param connection in autocommit mode, the writer's only connection
     * @throws StaleWriterException if a newer run or attempt owns the prefix or the index
     */
    public static WriterFence open(PostgresSinkConfig config, Connection connection, WriterStart start,
            PostgresSinkMetrics metrics) throws SQLException {
        new FenceHooks(config.sinkPrefix(), 0, start.subtaskIndex()).reached(ProtocolHooks.Step.FENCE_OPENING);
        SinkRuns.requireNewestRun(connection, config);
        WriterFence fence = new WriterFence(config, connection, start, newEpoch(connection), metrics);
        try {
            if (!fence.claims.claim(start.subtaskIndex()) || !fence.claims.claimRecorded(start::covers)) {
                fence.defer();
            }
            return fence;
        } catch (SQLException | RuntimeException e) {
            fence.close();
            throw e;
        }
    }

    /** The server's 64-bit id of a new transaction: never issued twice by one server, and ordered. */
    private static long newEpoch(Connection connection) throws SQLException {
        try (Statement statement = connection.createStatement();
                ResultSet result = statement.executeQuery("SELECT pg_current_xact_id()::text::bigint")) {
            result.next();
            return result.getLong(1);
        }
    }

    private IndexClaims round(ClaimToken token, IndexClaims.Mode mode) {
        return new IndexClaims(config, connection, token, mode, epoch, start.jobId(), locks, hooks,
                metrics.olderAttemptsFenced);
    }

    private void defer() throws SQLException {
        claims.releaseAll();
        deferred = true;
        metrics.deferredClaims.inc();
        LOG.info("PostgreSQL sink prefix '{}' subtask {} ({}): an index is claimed with the restored checkpoint or a"
                + " later one, so this attempt cannot tell yet whether it is the newest; it defers its claim, recovery"
                + " and writes to its first checkpoint barrier", config.sinkPrefix(), start.subtaskIndex(),
                claims.token());
    }

    public long epoch() {
        return epoch;
    }

    public String sinkPrefix() {
        return config.sinkPrefix();
    }

    /** Whether the attempt waits for a barrier to claim: it must not touch the database until then. */
    public boolean deferred() {
        return deferred;
    }

    /** The indices this writer holds; its recovery may act on these only. */
    public Set<Integer> claimed() {
        return claims.claimed();
    }

    /**
     * Claims, for a deferred attempt, at its first checkpoint barrier: with that checkpoint's id,
     * which every claim recorded before the attempt started is lower than.
     *
     * @throws StaleWriterException if a newer attempt claimed with a later barrier
     */
    public void claimAtBarrier(long checkpointId) throws SQLException {
        claimOrdered(claims.token().at(checkpointId));
        LOG.info("PostgreSQL sink prefix '{}' subtask {}: claimed its indices {} at checkpoint barrier {} ({})",
                config.sinkPrefix(), start.subtaskIndex(), claimed(), checkpointId, claims.token());
    }

    /**
     * Claims, for a deferred attempt whose bounded input ended before any barrier, with the restored
     * checkpoint and the attempt number (see the limit in {@link ClaimToken}).
     */
    public void claimAtEndOfInput() throws SQLException {
        claimOrdered(start.token(config.run()));
        LOG.info("PostgreSQL sink prefix '{}' subtask {}: its input ended before a checkpoint barrier; claimed its"
                + " indices {} by restored checkpoint and attempt number ({})", config.sinkPrefix(),
                start.subtaskIndex(), claimed(), claims.token());
    }

    private void claimOrdered(ClaimToken token) throws SQLException {
        SinkRuns.requireNewestRun(connection, config);
        claims = round(token, IndexClaims.Mode.ORDERED);
        claims.claim(start.subtaskIndex());
        claims.claimRecorded(start::covers);
        deferred = false;
    }

    /**
     * Makes this attempt the holder of {@code index}: records its token, terminates an older
     * holder, takes the advisory lock. Idempotent. In the immediate round a claim that cannot be
     * ordered (another attempt claimed the index meanwhile) makes the fence defer.
     *
     * @return false if the fence deferred
     * @throws StaleWriterException if a newer attempt has claimed the index
     * @throws IllegalStateException if a live session that cannot be ordered keeps the index
     */
    public boolean claim(int index) throws SQLException {
        if (claims.claim(index)) {
            return true;
        }
        defer();
        return false;
    }

    /**
     * Releases the indices' locks before the writer closes its connection: the server ends a closed
     * session asynchronously, and its locks would otherwise look held (by a live writer) for a moment
     * after the job stopped. Best effort: a broken connection releases them anyway.
     */
    public void releaseLocks() {
        try {
            locks.releaseAll();
        } catch (SQLException | RuntimeException e) {
            LOG.debug("PostgreSQL sink writer {} could not release its locks before closing", start.subtaskIndex(), e);
        }
    }

    /** Stops renewing the lease; the locks go with the connection, which the writer closes. */
    @Override
    public void close() {
        leaseKeeper.close();
    }
}
