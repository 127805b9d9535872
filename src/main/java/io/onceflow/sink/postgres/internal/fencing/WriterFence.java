package io.onceflow.sink.postgres.internal.fencing;

import io.onceflow.sink.postgres.internal.PostgresConnections;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.ProtocolHooks;
import io.onceflow.sink.postgres.internal.commit.TransactionId;
import io.onceflow.sink.postgres.internal.writer.WriterStart;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.OptionalInt;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.flink.annotation.Internal;
import org.apache.flink.metrics.Counter;
import org.postgresql.core.BaseStatement;
import org.postgresql.core.QueryExecutor;
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
 *       before its first statement arrives after its successor. Each claim writes the claimant's
 *       {@link ClaimToken} (run, restored checkpoint, attempt: Flink's order) into the writers table
 *       under a row lock, before taking the advisory lock, and a claimant whose token is not newer
 *       than the recorded one refuses to touch anything ({@link ClaimToken.Verdict#STALE}). So the
 *       newest claimant always wins and the holder it terminates is always older. Every index's row
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
 */
@Internal
public final class WriterFence implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(WriterFence.class);
    /** pg_advisory_lock(int, int) shows as objsubid 2 in pg_locks. */
    private static final int TWO_KEY_ADVISORY_LOCK = 2;
    /** The claimer of an index's row before its first claim (see {@link #insertUnclaimedRow}). */
    private static final int UNCLAIMED = -1;
    private static final String HOLDERS_SQL = "SELECT a.pid, l.objid::bigint, a.application_name,"
            + " coalesce(host(a.client_addr), 'a local socket'), a.state,"
            + " extract(epoch FROM clock_timestamp() - a.state_change)"
            + " FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
            + " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = " + TWO_KEY_ADVISORY_LOCK
            + " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            + " AND l.classid::bigint = ? AND (? OR l.objid::bigint = ?) AND l.pid <> pg_backend_pid()";

    private final PostgresSinkConfig config;
    private final Connection connection;
    private final WriterStart start;
    private final ClaimToken token;
    private final long epoch;
    private final int lockKey;
    private final Set<Integer> claimed = new TreeSet<>();
    private final ScheduledExecutorService leaseKeeper;
    private final Counter olderAttemptsFenced;

    private WriterFence(PostgresSinkConfig config, Connection connection, WriterStart start, long epoch,
            Counter olderAttemptsFenced) {
        this.olderAttemptsFenced = olderAttemptsFenced;
        this.config = config;
        this.connection = connection;
        this.start = start;
        this.token = start.token(config.run());
        this.epoch = epoch;
        this.lockKey = lockKey(config.sinkPrefix());
        this.leaseKeeper = Executors.newSingleThreadScheduledExecutor(runnable -> {
            Thread thread = new Thread(runnable, "onceflow PostgreSQL sink writer " + start.subtaskIndex() + " lease");
            thread.setDaemon(true);
            return thread;
        });
        long renewMillis = Math.max(1, config.writerLease().toMillis() / 3);
        leaseKeeper.scheduleWithFixedDelay(this::renewLease, renewMillis, renewMillis, TimeUnit.MILLISECONDS);
    }

    /**
     * Checks the run, takes a new epoch, starts renewing the lease and claims the writer's own index.
     *
     * @param connection in autocommit mode, the writer's only connection
     * @throws StaleWriterException if a newer run or attempt owns the prefix or the index
     */
    public static WriterFence open(PostgresSinkConfig config, Connection connection, WriterStart start,
            Counter olderAttemptsFenced) throws SQLException {
        SinkRuns.requireNewestRun(connection, config);
        WriterFence fence = new WriterFence(config, connection, start, newEpoch(connection), olderAttemptsFenced);
        try {
            fence.claim(start.subtaskIndex());
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

    /** The advisory lock key of a prefix; String.hashCode is specified, so every JVM agrees. */
    public static int lockKey(String sinkPrefix) {
        return ("onceflow-writer:" + sinkPrefix).hashCode();
    }

    public long epoch() {
        return epoch;
    }

    /** The indices this writer holds; its recovery may act on these only. */
    public Set<Integer> claimed() {
        return Collections.unmodifiableSet(claimed);
    }

    /**
     * Claims every index this subtask covers that earlier writers of the prefix recorded, so that
     * their zombies are fenced even where they left no transaction behind yet.
     */
    public void claimCoveredIndices() throws SQLException {
        for (int index : recordedIndices()) {
            if (start.covers(index)) {
                claim(index);
            }
        }
    }

    private List<Integer> recordedIndices() throws SQLException {
        List<Integer> indices = new ArrayList<>();
        try (PreparedStatement query = connection.prepareStatement(
                "SELECT subtask_index FROM " + config.writersTable() + " WHERE sink_prefix = ? ORDER BY subtask_index")) {
            query.setString(1, config.sinkPrefix());
            try (ResultSet rows = query.executeQuery()) {
                while (rows.next()) {
                    indices.add(rows.getInt(1));
                }
            }
        }
        return indices;
    }

    /**
     * Makes this attempt the holder of {@code index}: records its token, terminates an older
     * holder, takes the advisory lock. Idempotent.
     *
     * @throws StaleWriterException if a newer attempt has claimed the index
     * @throws IllegalStateException if a live session that cannot be ordered keeps the index
     */
    public void claim(int index) throws SQLException {
        if (claimed.contains(index)) {
            return;
        }
        long deadline = System.nanoTime() + claimPatience().toNanos();
        while (!recordClaimTerminatingOlderHolder(index)) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("PostgreSQL sink prefix '" + config.sinkPrefix() + "' subtask " + index
                        + " is held by a live session (" + describeHolders(index) + ") that cannot be ordered against"
                        + " this attempt (" + token + "). If no other job uses this prefix, that session is a"
                        + " leftover: end it with SELECT pg_terminate_backend(<pid>).");
            }
            sleep(Duration.ofMillis(Math.min(1000, Math.max(10, config.writerLease().toMillis() / 4))));
        }
        lock(index);
        ClaimToken current = currentClaim(index);
        if (!token.equals(current)) { // a newer attempt claimed it while this one waited for the lock
            unlock(index);
            throw new StaleWriterException(staleMessage(index, current));
        }
        claimed.add(index);
    }

    /**
     * In one transaction, with the index's row locked: refuses if the recorded claim is newer,
     * gives up (returns false) if it cannot be ordered and its holder is alive, and otherwise
     * terminates the holder and records this claim.
     */
    private boolean recordClaimTerminatingOlderHolder(int index) throws SQLException {
        insertUnclaimedRow(index);
        connection.setAutoCommit(false);
        boolean recorded = false;
        try {
            boundClaimTransaction();
            ClaimToken current = lockedClaim(index);
            ClaimToken.Verdict verdict = token.against(current);
            if (verdict == ClaimToken.Verdict.STALE) {
                throw new StaleWriterException(staleMessage(index, current));
            }
            List<LockHolder> holders = holders(connection, config.sinkPrefix(), OptionalInt.of(index));
            for (LockHolder holder : holders) {
                requireOwnSession(holder);
                if (verdict == ClaimToken.Verdict.UNDECIDED && !holder.leaseExpired(config.writerLease())) {
                    return false;
                }
            }
            reachedHook(ProtocolHooks.Step.CLAIM_DECIDED);
            for (LockHolder holder : holders) {
                LOG.warn("PostgreSQL sink prefix '{}' subtask {}: terminating the session of an older attempt ({}, claim"
                        + " {}) so that it can neither roll back nor prepare any more; this attempt: {}",
                        config.sinkPrefix(), index, holder, current, token);
                terminate(holder.pid());
                olderAttemptsFenced.inc();
            }
            recordClaim(index);
            recorded = true;
            return true;
        } finally {
            if (recorded) {
                connection.commit();
            } else {
                connection.rollback();
            }
            connection.setAutoCommit(true);
        }
    }

    /**
     * Makes sure the index has a row before any claimant reads it {@code FOR UPDATE}: with no row,
     * two claimants would both read "unclaimed" and the later upsert (a zombie's, woken from a pause
     * between its read and its write) would overwrite a newer claim. The row lock serialises them.
     */
    private void insertUnclaimedRow(int index) throws SQLException {
        try (PreparedStatement insert = connection.prepareStatement("INSERT INTO " + config.writersTable()
                + " (sink_prefix, subtask_index, run, restored_checkpoint, claimed_by_subtask, attempt, epoch, job_id)"
                + " VALUES (?, ?, 0, NULL, " + UNCLAIMED + ", " + UNCLAIMED + ", 0, '')"
                + " ON CONFLICT (sink_prefix, subtask_index) DO NOTHING")) {
            insert.setString(1, config.sinkPrefix());
            insert.setInt(2, index);
            insert.executeUpdate();
        }
    }

    /**
     * A claimant that is paused while it holds the index's row lock must not block its successors
     * for the length of the pause (the sessions' idle timeout is otherwise off, as a prepared
     * transaction may wait minutes for its checkpoint): the server ends such a session after one
     * lease, and a successor waits for the row lock a little longer than that.
     */
    private void boundClaimTransaction() throws SQLException {
        long leaseMillis = config.writerLease().toMillis();
        try (Statement statement = connection.createStatement()) {
            statement.execute("SET LOCAL idle_in_transaction_session_timeout = " + leaseMillis);
            statement.execute("SET LOCAL lock_timeout = " + (2 * leaseMillis + config.lockTimeout().toMillis()));
        }
    }

    private ClaimToken lockedClaim(int index) throws SQLException {
        return readClaim(index, " FOR UPDATE");
    }

    private ClaimToken currentClaim(int index) throws SQLException {
        return readClaim(index, "");
    }

    private ClaimToken readClaim(int index, String locking) throws SQLException {
        try (PreparedStatement query = connection.prepareStatement(
                "SELECT run, coalesce(restored_checkpoint, " + ClaimToken.NO_CHECKPOINT + "), claimed_by_subtask, attempt"
                        + " FROM " + config.writersTable() + " WHERE sink_prefix = ? AND subtask_index = ?" + locking)) {
            query.setString(1, config.sinkPrefix());
            query.setInt(2, index);
            try (ResultSet row = query.executeQuery()) {
                return row.next() && row.getInt(3) != UNCLAIMED
                        ? new ClaimToken(row.getLong(1), row.getLong(2), row.getInt(3), row.getInt(4)) : null;
            }
        }
    }

    private void recordClaim(int index) throws SQLException {
        try (PreparedStatement upsert = connection.prepareStatement("INSERT INTO " + config.writersTable()
                + " (sink_prefix, subtask_index, run, restored_checkpoint, claimed_by_subtask, attempt, epoch, job_id)"
                + " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (sink_prefix, subtask_index) DO UPDATE SET"
                + " run = EXCLUDED.run, restored_checkpoint = EXCLUDED.restored_checkpoint,"
                + " claimed_by_subtask = EXCLUDED.claimed_by_subtask, attempt = EXCLUDED.attempt,"
                + " epoch = EXCLUDED.epoch, job_id = EXCLUDED.job_id, claimed_at = clock_timestamp()")) {
            upsert.setString(1, config.sinkPrefix());
            upsert.setInt(2, index);
            upsert.setLong(3, token.run());
            if (token.restoredCheckpoint() == ClaimToken.NO_CHECKPOINT) {
                upsert.setNull(4, java.sql.Types.BIGINT);
            } else {
                upsert.setLong(4, token.restoredCheckpoint());
            }
            upsert.setInt(5, token.claimer());
            upsert.setInt(6, token.attempt());
            upsert.setLong(7, epoch);
            upsert.setString(8, start.jobId());
            upsert.executeUpdate();
        }
    }

    private String staleMessage(int index, ClaimToken current) {
        return "PostgreSQL sink prefix '" + config.sinkPrefix() + "' subtask " + index + " is claimed by a newer attempt ("
                + current + ") than this one (" + token + "): this attempt is a zombie (it was paused or cut off"
                + " while Flink restarted the job) and stops without touching the database. Nothing to do, unless"
                + " this repeats on a job that is not restarting: see 'Zombie attempts' in docs/operations.md.";
    }

    private void requireOwnSession(LockHolder holder) {
        String expectedPrefix = PostgresConnections.applicationName(config.sinkPrefix(), "writer-");
        if (holder.applicationName() == null || !holder.applicationName().startsWith(expectedPrefix)) {
            throw new IllegalStateException("the advisory lock (" + lockKey + ", " + holder.index() + ") that fences"
                    + " PostgreSQL sink prefix '" + config.sinkPrefix() + "' is held by another application ("
                    + holder + "): two sink prefixes' lock keys collide, or another program uses the same advisory"
                    + " lock. Give this job another postgres.sink.prefix.");
        }
    }

    private void terminate(int pid) throws SQLException {
        try (PreparedStatement terminate = connection.prepareStatement("SELECT pg_terminate_backend(?)")) {
            terminate.setInt(1, pid);
            terminate.executeQuery().close();
        } catch (SQLException e) {
            if ("42501".equals(e.getSQLState())) {
                throw new IllegalStateException("PostgreSQL sink prefix '" + config.sinkPrefix() + "': cannot end the"
                        + " session (pid " + pid + ") of an older attempt, which another database role opened: run all"
                        + " writers of a prefix as one role, or grant this role pg_signal_backend", e);
            }
            throw e;
        }
    }

    /** Blocks until the lock is free (the terminated holder gone), within lock_timeout. */
    private void lock(int index) throws SQLException {
        try (PreparedStatement lock = connection.prepareStatement("SELECT pg_advisory_lock(?, ?)")) {
            lock.setInt(1, lockKey);
            lock.setInt(2, index);
            lock.executeQuery().close();
        }
    }

    private void unlock(int index) throws SQLException {
        try (PreparedStatement unlock = connection.prepareStatement("SELECT pg_advisory_unlock(?, ?)")) {
            unlock.setInt(1, lockKey);
            unlock.setInt(2, index);
            unlock.executeQuery().close();
        }
    }

    private Duration claimPatience() {
        return config.writerLease().multipliedBy(2);
    }

    private String describeHolders(int index) {
        try {
            return holders(connection, config.sinkPrefix(), OptionalInt.of(index)).toString();
        } catch (SQLException e) {
            return "holder unknown: " + e.getMessage();
        }
    }

    /**
     * The sessions (other than this one) holding the prefix's lock of {@code index}, or of any
     * index when empty.
     */
    public static List<LockHolder> holders(Connection connection, String sinkPrefix, OptionalInt index) throws SQLException {
        List<LockHolder> holders = new ArrayList<>();
        try (PreparedStatement query = connection.prepareStatement(HOLDERS_SQL)) {
            query.setLong(1, Integer.toUnsignedLong(lockKey(sinkPrefix))); // pg_locks shows keys as oids
            query.setBoolean(2, index.isEmpty());
            query.setLong(3, index.orElse(-1));
            try (ResultSet rows = query.executeQuery()) {
                while (rows.next()) {
                    double idle = rows.getDouble(6);
                    holders.add(new LockHolder(rows.getInt(1), (int) rows.getLong(2), rows.getString(3),
                            rows.getString(4), rows.getString(5), rows.wasNull() ? null : idle));
                }
            }
        }
        return holders;
    }

    /**
     * A session holding an index's lock, as {@code pg_stat_activity} shows it. State and idle time
     * are null where the server hides them (another role without pg_read_all_stats).
     */
    public record LockHolder(int pid, int index, String applicationName, String clientAddress, String state,
            Double idleSeconds) {

        /** Not running a statement, and idle for longer than the lease: paused or gone. */
        boolean leaseExpired(Duration lease) {
            return state != null && !"active".equals(state) && idleSeconds != null
                    && idleSeconds * 1000 > lease.toMillis();
        }

        @Override
        public String toString() {
            return "pid " + pid + ", " + applicationName + " from " + clientAddress + ", " + state
                    + (idleSeconds == null ? "" : String.format(" for %.1f s", idleSeconds));
        }
    }

    /** A query that starts no transaction, so an idle writer does not hold a snapshot open. */
    private void reachedHook(ProtocolHooks.Step step) {
        try {
            ProtocolHooks.reached(step, new TransactionId(config.sinkPrefix(), epoch, start.subtaskIndex(), 0));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private void renewLease() {
        reachedHook(ProtocolHooks.Step.LEASE_RENEWAL);
        try (Statement statement = connection.createStatement()) {
            statement.unwrap(BaseStatement.class).executeWithFlags("SELECT 1", QueryExecutor.QUERY_SUPPRESS_BEGIN);
        } catch (SQLException | RuntimeException e) {
            // The writer's own next statement reports a broken connection.
            LOG.debug("Renewing the lease of PostgreSQL sink writer {} failed", start.subtaskIndex(), e);
        }
    }

    private static void sleep(Duration duration) {
        try {
            Thread.sleep(duration.toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while waiting for a PostgreSQL sink index", e);
        }
    }

    /**
     * Releases the indices' locks before the writer closes its connection: the server ends a closed
     * session asynchronously, and its locks would otherwise look held (by a live writer) for a moment
     * after the job stopped. Best effort: a broken connection releases them anyway.
     */
    public void releaseLocks() {
        try (Statement statement = connection.createStatement()) {
            statement.unwrap(BaseStatement.class).executeWithFlags("SELECT pg_advisory_unlock_all()",
                    QueryExecutor.QUERY_SUPPRESS_BEGIN);
        } catch (SQLException | RuntimeException e) {
            LOG.debug("PostgreSQL sink writer {} could not release its locks before closing", start.subtaskIndex(), e);
        }
    }

    /** Stops renewing the lease; the locks go with the connection, which the writer closes. */
    @Override
    public void close() {
        leaseKeeper.shutdownNow();
        try {
            leaseKeeper.awaitTermination(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
