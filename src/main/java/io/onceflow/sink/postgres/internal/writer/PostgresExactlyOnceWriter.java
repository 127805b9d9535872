package io.onceflow.sink.postgres.internal.writer;

import io.onceflow.api.Event;
import io.onceflow.sink.postgres.EffectFunction;
import io.onceflow.sink.postgres.PostgresSink;
import io.onceflow.sink.postgres.internal.PostgresConnections;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.ProtocolHooks;
import io.onceflow.sink.postgres.internal.commit.PostgresCommittable;
import io.onceflow.sink.postgres.internal.commit.PostgresWriterState;
import io.onceflow.sink.postgres.internal.commit.PreparedTransactionRecovery;
import io.onceflow.sink.postgres.internal.commit.TransactionId;
import io.onceflow.sink.postgres.internal.effects.EffectWorker;
import io.onceflow.sink.postgres.internal.fencing.SinkRuns;
import io.onceflow.sink.postgres.internal.fencing.StaleWriterException;
import io.onceflow.sink.postgres.internal.fencing.WriterFence;
import io.onceflow.sink.postgres.internal.schema.BarrierLockChecks;
import io.onceflow.sink.postgres.internal.schema.PostgresSchema;
import io.onceflow.sink.postgres.internal.schema.ServerChecks;
import java.io.IOException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.OptionalLong;
import org.apache.flink.annotation.Internal;
import org.apache.flink.api.connector.sink2.CommittingSinkWriter;
import org.apache.flink.api.connector.sink2.InitContext;
import org.apache.flink.api.connector.sink2.StatefulSinkWriter;
import org.postgresql.core.BaseStatement;
import org.postgresql.core.QueryExecutor;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Internal. The writer of {@link PostgresSink}: one database transaction per checkpoint, written in
 * batches, prepared at the checkpoint barrier and handed to the committer. It never commits.
 *
 * <p>Start-up, before anything is written: check {@code max_prepared_transactions}, create missing
 * tables, refuse unique indexes and triggers that would stall checkpoints ({@link BarrierLockChecks}),
 * fence older attempts out and claim this subtask's indices ({@link WriterFence}), roll back
 * the abandoned prepared transactions of those indices ({@link PreparedTransactionRecovery}). The
 * connection opened here is the writer's only one for its whole life: the fence's locks live on it,
 * so once a successor has ended its session nothing this writer sends reaches the database.
 *
 * <p>With an {@link EffectFunction}, start-up also starts the subtask's {@link EffectWorker}, which
 * applies queued effects once their transaction committed, never in the checkpoint's transaction:
 * a prepared transaction keeps its row locks until its checkpoint completes, and an effect that
 * locked an account there would make every other subtask's effect on that account wait for a
 * checkpoint that waits for that subtask's barrier, a cycle PostgreSQL cannot see.
 *
 * <p>Per checkpoint: rows go into the open transaction in batches of {@code batchSize} (with an
 * effect, each new row's effect queued, tagged with the transaction's gid), each executed by
 * {@link BackgroundUpserts} while the task thread goes on; {@link #prepareCommit()}
 * writes the rest, waits for all of them, adds the gid to the commit log in the same transaction
 * and runs {@code PREPARE TRANSACTION}. A checkpoint without rows prepares nothing.
 * {@link #snapshotState} records the checkpoint's horizon ({@link PostgresWriterState}).
 *
 * <p>The checkpoint id in a gid: Flink calls {@code prepareCommit()} without telling the checkpoint
 * id, so the writer uses the id after the last one it snapshotted (or after the restored one), as
 * KafkaSink does. That is never greater than the real checkpoint id (ids only grow) and always
 * greater than every checkpoint this subtask took part in before, so for any restored checkpoint N
 * the transactions with a gid checkpoint id &gt; N are exactly those of checkpoints after N.
 *
 * <p>Known limit: an id written in checkpoint N and again in N+1 before N is committed waits for
 * the row lock of N's prepared transaction. The committer runs on the task thread, which waits for
 * the upserts at the next prepareCommit (or when the upsert queue is full), so the wait usually
 * ends with lock_timeout, a task failure and a restart that commits N first (correct, but slow).
 * Upstream dedup makes this practically impossible (its TTL is far longer than a checkpoint
 * interval). The rows an effect changes (one account's balance in every checkpoint) are not locked
 * by the checkpoint's transaction: effects run after its commit.
 */
@Internal
public final class PostgresExactlyOnceWriter
        implements CommittingSinkWriter<Event, PostgresCommittable>, StatefulSinkWriter<Event, PostgresWriterState> {
    private static final Logger LOG = LoggerFactory.getLogger(PostgresExactlyOnceWriter.class);
    private final String sinkPrefix;
    private final WriterStart start;
    private final String writerName;
    private final String insertIntoCommitLogSql;
    private final Connection connection;
    private final int backendPid;
    private final WriterFence fence;
    private final EventUpsertBatch batch;
    private final BackgroundUpserts upserts;
    /** Null without an effect function. */
    private final EffectWorker effects;
    /** A bounded input ended: the effect worker applies the queue before the task finishes. */
    private boolean inputEnded;
    private final PostgresSinkMetrics metrics;
    private long nextCheckpointId;
    /** Events written into the open transaction since the last prepare. */
    private int transactionRows;

    public PostgresExactlyOnceWriter(PostgresSinkConfig config, WriterStart start, PostgresSinkMetrics metrics)
            throws IOException {
        this.sinkPrefix = config.sinkPrefix();
        this.start = start;
        this.metrics = metrics;
        this.writerName = "PostgreSQL sink writer " + start.subtaskIndex() + " (prefix '" + sinkPrefix + "')";
        // Only the writer's own session may write a gid into the log, so a transaction-pooling proxy
        // that moved the connection to another session is caught before PREPARE.
        this.insertIntoCommitLogSql = config.schema().commitLog().insertFromSessionStatement();
        this.nextCheckpointId = start.restoredCheckpointId().orElse(InitContext.INITIAL_CHECKPOINT_ID - 1) + 1;
        if (config.run() == PostgresSinkConfig.NO_RUN) {
            throw new IOException(writerName + " has no run: register one with PostgresRunRegistry.startRun before"
                    + " submitting the job, and put its RegisteredRun's sink into the job");
        }
        try {
            connection = PostgresConnections.open(config, "writer-" + start.subtaskIndex());
        } catch (SQLException e) {
            throw new IOException(writerName + " could not connect (" + config + ")", e);
        }
        WriterFence openedFence = null;
        try {
            ServerChecks.checkMaxPreparedTransactions(connection, start.parallelism(),
                    config.tolerableCheckpointFailures());
            config.schema().prepare(connection);
            // again at every start, not only in main's: an index or trigger added while the job ran
            // would make this restart wait for ever (see BarrierLockChecks)
            BarrierLockChecks.check(connection, config.schema(), start.parallelism(),
                    config.tables().allowTriggersThatMayStallCheckpoints());
            backendPid = backendPid(connection);
            openedFence = WriterFence.open(config, connection, start, metrics.olderAttemptsFenced);
            fence = openedFence;
            fence.claimCoveredIndices();
            metrics.transactionsRolledBackOnRecovery.inc(PreparedTransactionRecovery.rollBackAbandoned(connection,
                    claimPreparedOfCoveredIndices(), start.restoredCheckpointId(), start.restoredHorizon(), writerName)
                    .size());
            connection.setAutoCommit(false);
        } catch (SQLException | RuntimeException e) {
            if (e instanceof StaleWriterException) {
                // the fence did its job: say so where operators look (docs/operations.md, section 6)
                metrics.staleWriterAttemptsRefused.inc();
                LOG.warn("{}: stale writer attempt refused, nothing touched: {}", writerName, e.getMessage());
            }
            if (openedFence != null) {
                openedFence.close();
            }
            PostgresConnections.closeQuietly(connection, e);
            throw new IOException(writerName + " could not start: " + e.getMessage(), e);
        }
        batch = EventUpsertBatch.of(config, metrics);
        upserts = new BackgroundUpserts(batch, connection, writerName, BackgroundUpserts.MAX_IN_FLIGHT);
        effects = EffectWorker.startIfConfigured(config, start.subtaskIndex(), metrics);
    }

    private static int backendPid(Connection connection) throws SQLException {
        try (Statement statement = connection.createStatement();
                ResultSet result = statement.executeQuery("SELECT pg_backend_pid()")) {
            result.next();
            return result.getInt(1);
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
            for (TransactionId id : PreparedTransactionRecovery.prepared(connection, sinkPrefix)) {
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

    @Override
    public void write(Event event, Context context) throws IOException {
        if (transactionRows == 0) {
            batch.effectsBelongTo(openTransaction());
        }
        upserts.add(event);
        transactionRows++;
    }

    /** The transaction rows go into now: the one {@link #prepareCommit()} prepares next. */
    private TransactionId openTransaction() {
        return new TransactionId(sinkPrefix, fence.epoch(), start.subtaskIndex(), nextCheckpointId);
    }

    @Override
    public void flush(boolean endOfInput) throws IOException {
        // At end of input Flink calls prepareCommit() next, for the final checkpoint.
        inputEnded |= endOfInput;
        upserts.flush();
    }

    @Override
    public Collection<PostgresCommittable> prepareCommit() throws IOException {
        flush(false); // the connection is the task thread's again from here
        if (transactionRows == 0) {
            return List.of();
        }
        TransactionId transaction = openTransaction();
        ProtocolHooks.reached(ProtocolHooks.Step.BEFORE_PREPARE, transaction);
        try (PreparedStatement log = connection.prepareStatement(insertIntoCommitLogSql);
                Statement prepare = connection.createStatement()) {
            log.setString(1, transaction.encode());
            log.setInt(2, backendPid);
            if (log.executeUpdate() != 1) {
                throw new SQLException(SinkRuns.transactionPoolingMessage(), "08000");
            }
            // PREPARE TRANSACTION takes no parameters; the gid is made of validated parts only.
            prepare.execute("PREPARE TRANSACTION '" + transaction.encode() + "'");
        } catch (SQLException e) {
            throw new IOException(writerName + " could not prepare " + transaction + ": " + e.getMessage(), e);
        }
        metrics.transactionsPrepared.inc();
        metrics.rowsPerTransaction.update(transactionRows);
        transactionRows = 0;
        // Never reuse the id, even if Flink aborts this checkpoint before snapshotState().
        nextCheckpointId++;
        ProtocolHooks.reached(ProtocolHooks.Step.AFTER_PREPARE, transaction);
        return List.of(new PostgresCommittable(transaction));
    }

    /**
     * Records the checkpoint's horizon, in as many copies as any later parallelism needs (see
     * {@link PostgresWriterState}). Runs on the task thread after {@link #prepareCommit()}, when no
     * upsert is running; the query starts no transaction.
     */
    @Override
    public List<PostgresWriterState> snapshotState(long checkpointId) throws IOException {
        nextCheckpointId = Math.max(nextCheckpointId, checkpointId + 1);
        PostgresWriterState state = new PostgresWriterState(horizon());
        return Collections.nCopies(
                PostgresWriterState.copiesPerSubtask(start.parallelism(), start.maxParallelism()), state);
    }

    private long horizon() throws IOException {
        try (Statement statement = connection.createStatement()) {
            statement.unwrap(BaseStatement.class).executeWithFlags(
                    "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint", QueryExecutor.QUERY_SUPPRESS_BEGIN);
            try (ResultSet result = statement.getResultSet()) {
                result.next();
                return result.getLong(1);
            }
        } catch (SQLException e) {
            throw new IOException(writerName + " could not read the transaction horizon for its checkpoint: "
                    + e.getMessage(), e);
        }
    }

    /** The restored checkpoint, for tests. */
    public OptionalLong restoredCheckpointId() {
        return start.restoredCheckpointId();
    }

    /**
     * Closes the connection, dropping queued upserts. PostgreSQL rolls back a transaction that was
     * not prepared yet; prepared ones stay for the committer (checkpoint completed) or for recovery
     * (it did not). The fence's locks go with the session. The effect worker stops; its effects in
     * flight stay queued.
     */
    @Override
    public void close() throws SQLException {
        try {
            if (effects != null && inputEnded) {
                effects.closeAfterDraining();
            } else if (effects != null) {
                effects.close();
            }
            fence.close();
            upserts.close();
            fence.releaseLocks();
        } finally {
            connection.close();
        }
    }
}
