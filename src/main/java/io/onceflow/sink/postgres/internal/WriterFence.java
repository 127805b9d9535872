package io.onceflow.sink.postgres.internal;

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
 *   <li><b>One rule: claims happen at checkpoint barriers.</b> An attempt touches nothing of its
 *       indices (no rollback, no write) until its first checkpoint barrier. There it claims each
 *       subtask index it covers with its {@link ClaimToken} (run, barrier id), in the writers table
 *       under the index's row lock. Barrier ids only grow and belong to one execution, so a later
 *       attempt always claims with a higher token than an earlier one, across restarts and
 *       JobManagers, whenever each reaches the database: a claimant finding a newer claim is a
 *       zombie and stops ({@link StaleWriterException}); a zombie of a dead JobManager that never
 *       receives a barrier never claims.
 *   <li><b>Who may act on an index:</b> every subtask index of a sink prefix has a session-level
 *       advisory lock ({@code pg_advisory_lock(key(prefix), index)}). A claimant takes the lock of
 *       its own index, and of every old index it recovers after a rescale, before its recovery scan,
 *       and holds it on its one connection for its whole life. Recovery ({@code ROLLBACK PREPARED})
 *       and {@code PREPARE TRANSACTION} only ever run on that connection, after the claim.
 *   <li><b>How a successor fences its predecessor:</b> it terminates the holder's backend
 *       ({@code pg_terminate_backend}) before recording its claim, then waits for the lock and reads
 *       its claim back with a locking read. PostgreSQL rolls back the holder's open (unprepared)
 *       transaction and drops the session; whatever the zombie sends afterwards fails, because the
 *       writer never reconnects. The successor's recovery scan runs only after the old backend is
 *       gone, so it sees every transaction the old one managed to prepare. Every index's row exists
 *       before anyone reads it {@code FOR UPDATE} (so two first claims cannot both read
 *       "unclaimed"), and the claim transaction is the only one whose idle time the server bounds
 *       (one lease): a claimant paused while it holds the row lock blocks its successor for a lease,
 *       not for the length of its pause.
 *   <li><b>Runs:</b> at start and before claiming, a writer checks that its run is still the newest
 *       of the prefix: a woken attempt of a job that was replaced by a new submission stops there.
 *   <li><b>Leases:</b> a writer renews its session's activity every third of {@code writerLease} (a
 *       query from a daemon thread that starts no transaction), so that {@link SinkRuns#start} can
 *       tell another live job from a dead one.
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
    /** Null until the first checkpoint barrier. */
    private IndexClaims claims;

    private WriterFence(PostgresSinkConfig config, Connection connection, WriterStart start, long epoch,
            PostgresSinkMetrics metrics) {
        this.config = config;
        this.connection = connection;
        this.start = start;
        this.epoch = epoch;
        this.metrics = metrics;
        this.locks = new AdvisoryLocks(connection, config.sinkPrefix());
        this.hooks = new FenceHooks(config.hooks(), config.sinkPrefix(), epoch, start.subtaskIndex());
        this.leaseKeeper = new LeaseKeeper(connection, config.writer().writerLease(), hooks);
    }

    /**
     * Checks the run, takes a new epoch and starts renewing the lease. Claims nothing: that waits
     * for the first checkpoint barrier ({@link #claimAtBarrier}).
     *
     * @param connection in autocommit mode, the writer's only connection
     * @throws StaleWriterException if a newer run owns the prefix
     */
    public static WriterFence open(PostgresSinkConfig config, Connection connection, WriterStart start,
            PostgresSinkMetrics metrics) throws SQLException {
        long epoch = newEpoch(connection);
        new FenceHooks(config.hooks(), config.sinkPrefix(), epoch, start.subtaskIndex()).reached(ProtocolHooks.Step.FENCE_OPENING);
        SinkRuns.requireNewestRun(connection, config);
        return new WriterFence(config, connection, start, epoch, metrics);
    }

    /** The server's 64-bit id of a new transaction: never issued twice by one server, and ordered. */
    private static long newEpoch(Connection connection) throws SQLException {
        try (Statement statement = connection.createStatement();
                ResultSet result = statement.executeQuery("SELECT pg_current_xact_id()::text::bigint")) {
            result.next();
            return result.getLong(1);
        }
    }

    public long epoch() {
        return epoch;
    }

    public String sinkPrefix() {
        return config.sinkPrefix();
    }

    /** The indices this writer holds; its recovery may act on these only. */
    public Set<Integer> claimed() {
        return claims == null ? Set.of() : claims.claimed();
    }

    /**
     * Claims, at the attempt's first checkpoint barrier and with that barrier's id, the writer's own
     * index, and records the claim on every index it covers up to the maximum parallelism, held by a
     * session or not, so that an attempt of an earlier, wider execution is fenced out of those too,
     * even one that never claimed or left nothing behind.
     *
     * @throws StaleWriterException if a newer run or a newer attempt claimed one of them
     */
    public void claimAtBarrier(long checkpointId) throws SQLException {
        SinkRuns.requireNewestRun(connection, config);
        claims = new IndexClaims(config, connection, start.tokenAt(config.run(), checkpointId), epoch, start.jobId(),
                locks, hooks, metrics.olderAttemptsFenced);
        claims.fenceCovered(start);
        claims.claim(start.subtaskIndex());
        LOG.info("PostgreSQL sink prefix '{}' subtask {}: claimed its indices {} at checkpoint barrier {} ({})",
                config.sinkPrefix(), start.subtaskIndex(), claimed(), checkpointId, claims.token());
    }

    /**
     * Claims one more index after {@link #claimAtBarrier}, with the same token (an old index whose
     * prepared transaction recovery found). Idempotent.
     *
     * @throws StaleWriterException if a newer attempt has claimed the index
     */
    public void claim(int index) throws SQLException {
        claims.claim(index);
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
