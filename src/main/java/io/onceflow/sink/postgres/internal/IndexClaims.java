package io.onceflow.sink.postgres.internal;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.OptionalInt;
import org.apache.flink.metrics.Counter;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The claims of one writer attempt, made at its first checkpoint barrier (see {@link WriterClaim}):
 * for each subtask index it covers, judge its {@link ClaimToken} against the index's current claim
 * under the row's lock, terminate the holder, record the claim, then take the index's advisory lock
 * and check, with a locking read, that the claim is still its own.
 */
final class IndexClaims {
    private static final Logger LOG = LoggerFactory.getLogger(IndexClaims.class);

    private final PostgresSinkConfig config;
    private final Connection connection;
    private final ClaimToken token;
    private final long epoch;
    private final String jobId;
    private final ClaimRows rows;
    private final AdvisoryLocks locks;
    private final FenceHooks hooks;
    private final Counter olderAttemptsFenced;
    private final Set<Integer> claimed = new TreeSet<>();

    IndexClaims(PostgresSinkConfig config, Connection connection, ClaimToken token, long epoch, String jobId,
            AdvisoryLocks locks, FenceHooks hooks, Counter olderAttemptsFenced) {
        this.config = config;
        this.connection = connection;
        this.token = token;
        this.epoch = epoch;
        this.jobId = jobId;
        this.rows = new ClaimRows(connection, config.schema().writers(), config.sinkPrefix());
        this.locks = locks;
        this.hooks = hooks;
        this.olderAttemptsFenced = olderAttemptsFenced;
    }

    /**
     * The claims of a writer attempt at its first barrier: fences every index {@code start} covers
     * ({@link #fenceCovered}), claims its own index, then the index of every prepared transaction it
     * covers, until no new one shows up (a fenced holder may have prepared one just before it was
     * ended).
     *
     * @return the prepared transactions of the indices it covers, for its recovery
     * @throws StaleWriterException if a newer attempt has claimed one of them
     */
    List<TransactionId> claimAtBarrier(WriterStart start) throws SQLException {
        fenceCovered(start);
        claim(start.subtaskIndex());
        while (true) {
            List<TransactionId> covered = new ArrayList<>();
            boolean claimedMore = false;
            for (TransactionId id : PreparedTransactionRecovery.prepared(connection, config.sinkPrefix())) {
                if (start.covers(id.subtaskIndex())) {
                    claimedMore |= !claimed.contains(id.subtaskIndex());
                    claim(id.subtaskIndex());
                    covered.add(id);
                }
            }
            if (!claimedMore) {
                LOG.info("PostgreSQL sink prefix '{}' subtask {}: claimed its indices {} at checkpoint barrier {} ({})",
                        config.sinkPrefix(), start.subtaskIndex(), claimed, token.claimCheckpoint(), token);
                return covered;
            }
        }
    }

    /**
     * Fences, in one statement, every index {@code start} covers ({@link WriterStart#covers}) below
     * the maximum parallelism (its own index and every one a wider execution may have had), so that
     * an attempt of an earlier execution that never claimed one of them cannot claim it later; then
     * claims every covered index that a session holds, ending the holder: above the maximum
     * parallelism too (a zombie of an earlier run started with a larger one, which a restore cannot
     * have: Flink keeps it).
     *
     * @throws StaleWriterException if a newer attempt has claimed one of them
     */
    private void fenceCovered(WriterStart start) throws SQLException {
        int first = start.subtaskIndex();
        int last = start.maxParallelism() - 1;
        int step = start.parallelism();
        PostgresConnections.inTransaction(connection, () -> {
            boundClaimTransaction();
            Set<Integer> fenced = rows.fenceSeries(first, last, step, token, epoch, jobId);
            for (int index = first; index <= last; index += step) {
                ClaimToken current = fenced.contains(index) ? token : rows.read(index, false);
                if (!token.supersedes(current)) {
                    throw new StaleWriterException(staleMessage(index, current));
                }
            }
        });
        for (LockHolder holder : AdvisoryLocks.holders(connection, config.sinkPrefix(), OptionalInt.empty())) {
            if (start.covers(holder.index())) {
                claim(holder.index());
            }
        }
    }

    /**
     * Makes this attempt the holder of {@code index}: records its token, terminates the holder, takes
     * the advisory lock. Idempotent.
     *
     * @throws StaleWriterException if a newer attempt has claimed the index
     */
    private void claim(int index) throws SQLException {
        if (claimed.contains(index)) {
            return;
        }
        recordClaimTerminatingHolder(index);
        hooks.reached(ProtocolHooks.Step.CLAIM_RECORDED);
        locks.lock(index);
        locks.requireHeldHere(index);
        // a locking read: a newer claim recorded meanwhile and not committed yet (its claimant found no
        // holder to end, as this one had no lock yet) is waited for, never read past
        ClaimToken current = rows.read(index, true);
        if (!token.equals(current)) { // a newer attempt claimed it while this one waited for the lock
            locks.unlock(index);
            throw new StaleWriterException(staleMessage(index, current));
        }
        claimed.add(index);
    }

    /**
     * In one transaction, with the index's row locked: refuses if the recorded claim is newer, and
     * otherwise terminates the holder (an older attempt) and records this claim.
     */
    private void recordClaimTerminatingHolder(int index) throws SQLException {
        rows.insertUnclaimed(index);
        PostgresConnections.inTransaction(connection, () -> {
            boundClaimTransaction();
            ClaimToken current = rows.read(index, true);
            if (!token.supersedes(current)) {
                throw new StaleWriterException(staleMessage(index, current));
            }
            List<LockHolder> holders = locks.holders(index);
            holders.forEach(this::requireOwnSession);
            hooks.reached(ProtocolHooks.Step.CLAIM_DECIDED);
            for (LockHolder holder : holders) {
                LOG.warn("PostgreSQL sink prefix '{}' subtask {}: terminating the session of an older attempt ({}, claim"
                        + " {}) so that it can neither roll back nor prepare any more; this attempt: {}",
                        config.sinkPrefix(), index, holder, current, token);
                terminate(holder.pid());
                olderAttemptsFenced.inc();
            }
            rows.record(index, token, epoch, jobId);
        });
    }

    /**
     * A claimant that is paused while it holds the index's row lock must not block its successors
     * for the length of the pause (the sessions' idle timeout is otherwise off, as a prepared
     * transaction may wait minutes for its checkpoint): the server ends such a session after one
     * lease, and a successor waits for the row lock a little longer than that.
     */
    private void boundClaimTransaction() throws SQLException {
        long leaseMillis = config.writer().writerLease().toMillis();
        try (Statement statement = connection.createStatement()) {
            statement.execute("SET LOCAL idle_in_transaction_session_timeout = " + leaseMillis);
            statement.execute("SET LOCAL lock_timeout = " + config.writer().claimLockTimeout().toMillis());
        }
    }

    private String staleMessage(int index, ClaimToken current) {
        return "PostgreSQL sink prefix '" + config.sinkPrefix() + "' subtask " + index + " is claimed by a newer attempt ("
                + current + ") than this one (" + token + "): this attempt is a zombie (it was paused or cut off"
                + " while Flink restarted the job) and stops without touching the database. Nothing to do, unless"
                + " this repeats on a job that is not restarting: see 'What a woken zombie logs' in docs/failover.md.";
    }

    private void requireOwnSession(LockHolder holder) {
        if (!holder.isWriterOf(config.sinkPrefix())) {
            throw new IllegalStateException("the advisory lock (" + locks.lockKey() + ", " + holder.index() + ") that"
                    + " fences PostgreSQL sink prefix '" + config.sinkPrefix() + "' is held by another application ("
                    + holder + "): two sink prefixes' lock keys collide, or another program uses the same advisory"
                    + " lock. Give this job another postgres.sink.prefix.");
        }
    }

    private void terminate(int pid) throws SQLException {
        try (PreparedStatement terminate = connection.prepareStatement("SELECT pg_terminate_backend(?)")) {
            terminate.setInt(1, pid);
            terminate.executeQuery().close();
        } catch (SQLException e) {
            if (SqlStates.is(e, SqlStates.INSUFFICIENT_PRIVILEGE)) {
                throw new IllegalStateException("PostgreSQL sink prefix '" + config.sinkPrefix() + "': cannot end the"
                        + " session (pid " + pid + ") of an older attempt, which another database role opened: run all"
                        + " writers of a prefix as one role, or grant this role pg_signal_backend", e);
            }
            throw e;
        }
    }
}
