package io.onceflow.sink.postgres.internal;

import io.onceflow.api.Event;
import java.io.IOException;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Collection;
import java.util.List;
import org.apache.flink.annotation.Internal;
import org.apache.flink.annotation.VisibleForTesting;
import org.apache.flink.api.connector.sink2.CommittingSinkWriter;
import org.apache.flink.api.connector.sink2.InitContext;
import org.apache.flink.api.connector.sink2.StatefulSinkWriter;
import org.postgresql.core.BaseStatement;
import org.postgresql.core.QueryExecutor;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Internal. The writer of {@code PostgresSink}: one database transaction per checkpoint, written in
 * batches, prepared at the checkpoint barrier and handed to the committer. It never commits.
 *
 * <p>Start-up, before anything is written: the start checks that can change while a job runs
 * ({@link RunStartChecks#checkAtWriterStart}: prepared transactions, tables, indexes and triggers
 * that would stall checkpoints, a transaction-pooling proxy), notice a change of server since the
 * run was registered ({@link ServerChange}), open its {@link WriterClaim}. The
 * connection opened here is the writer's only one for its whole life: the claim's locks live on it,
 * so once a successor has ended its session nothing this writer sends reaches the database.
 *
 * <p>The first checkpoint barrier: until it, the writer holds the events it receives and touches
 * nothing; at it ({@link #snapshotState}) its {@link WriterClaim} claims and recovers, and the held
 * events are written and prepared as this checkpoint's transaction, under the name that
 * {@link #prepareCommit()} handed to the committer just before (at end of input: the final one's).
 *
 * <p>With an {@link EffectFunction}, start-up also starts the subtask's {@link EffectWorker}, which
 * applies queued effects once their transaction committed, never in the checkpoint's transaction
 * (a prepared transaction keeps its row locks until its checkpoint completes: docs/effects.md).
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
 * the row lock of N's prepared transaction, usually until lock_timeout, a task failure and a restart
 * that commits N first (correct, but slow); upstream dedup makes this practically impossible.
 */
@Internal
public final class PostgresExactlyOnceWriter
        implements CommittingSinkWriter<Event, PostgresCommittable>, StatefulSinkWriter<Event, PostgresWriterState> {
    private static final Logger LOG = LoggerFactory.getLogger(PostgresExactlyOnceWriter.class);
    private final String sinkPrefix;
    private final ProtocolHooks hooks;
    private final WriterStart start;
    private final String writerName;
    private final String insertIntoCommitLogSql;
    private final Connection connection;
    private final int backendPid;
    private final WriterClaim claim;
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
    /** The transaction {@link #prepareCommit()} named for the events {@link #claim} holds; null if none. */
    private TransactionId namedBeforeClaim;

    public PostgresExactlyOnceWriter(PostgresSinkConfig config, WriterStart start, PostgresSinkMetrics metrics)
            throws IOException {
        this.sinkPrefix = config.sinkPrefix();
        this.hooks = config.hooks();
        this.start = start;
        this.metrics = metrics;
        this.writerName = "PostgreSQL sink writer " + start.subtaskIndex() + " (prefix '" + sinkPrefix + "')";
        // Only the writer's own session, while it holds its index's claim, may write a gid into the
        // log: a transaction-pooling proxy or a lost claim is caught in the transaction it prepares.
        this.insertIntoCommitLogSql = config.schema().commitLog().insertWhileClaimedStatement(config.schema().writers());
        this.nextCheckpointId = start.restoredCheckpointId().orElse(InitContext.INITIAL_CHECKPOINT_ID - 1) + 1;
        if (config.run() == PostgresSinkConfig.NO_RUN) {
            throw new IOException(writerName + " has no run: register one with PostgresRunRegistry.startRun before"
                    + " submitting the job, and put its RegisteredRun's sink into the job");
        }
        HeldEvents held = new HeldEvents(Path.of(System.getProperty("java.io.tmpdir")), writerName,
                config.writer().heldEventsMemoryBytes(), metrics.eventsSpilledBeforeBarrier);
        try {
            for (Event event : start.restoredDeferredEvents()) {
                held.add(event);
            }
            connection = PostgresConnections.open(config, "writer-" + start.subtaskIndex());
        } catch (SQLException | IOException | RuntimeException e) {
            held.close();
            throw new IOException(writerName + " could not start (" + config + "): " + e.getMessage(), e);
        }
        batch = EventUpsertBatch.of(config, metrics);
        upserts = new BackgroundUpserts(batch, connection, writerName, BackgroundUpserts.MAX_IN_FLIGHT);
        WriterClaim opened = null;
        try {
            new RunStartChecks(connection, config).checkAtWriterStart(start.parallelism());
            backendPid = PostgresConnections.backendPid(connection);
            // before the claim opens: a run the server lost with a failover is recorded again there
            boolean serverChanged = !ServerChange.seenByWriter(connection, config, start.jobId(),
                    start.restoredCheckpointId(), start.restoredHorizon(), writerName).isEmpty();
            opened = WriterClaim.open(config, connection, start, held, metrics, writerName, serverChanged);
            effects = EffectWorker.startIfConfigured(config, start.subtaskIndex(), start.parallelism(), metrics);
        } catch (SQLException | RuntimeException | Error e) {
            WriterClaim.reportIfRefused(e, metrics, writerName);
            if (opened != null) { // its lease would keep this session looking live: a new run would be refused
                opened.close();
            }
            PostgresConnections.closeQuietly(connection, e);
            held.close();
            if (e instanceof Error error) {
                throw error;
            }
            throw new IOException(writerName + " could not start: " + e.getMessage(), e);
        }
        claim = opened;
    }

    @Override
    public void write(Event event, Context context) throws IOException {
        if (claim.hold(event)) {
            return;
        }
        if (transactionRows == 0) {
            batch.effectsBelongTo(openTransaction());
        }
        upserts.add(event);
        transactionRows++;
    }

    /** The transaction rows go into now: the one {@link #prepareCommit()} prepares next. */
    private TransactionId openTransaction() {
        return new TransactionId(sinkPrefix, claim.epoch(), start.subtaskIndex(), nextCheckpointId);
    }

    @Override
    public void flush(boolean endOfInput) throws IOException {
        // At end of input Flink calls prepareCommit() next, for the final checkpoint.
        inputEnded |= endOfInput;
        upserts.flush();
    }

    @Override
    public Collection<PostgresCommittable> prepareCommit() throws IOException {
        try {
            return prepareCommitOrFail();
        } catch (IOException | RuntimeException e) {
            claim.failed(e); // a flush or prepare that failed ends the attempt: Flink fails the task
            throw e;
        }
    }

    private Collection<PostgresCommittable> prepareCommitOrFail() throws IOException {
        flush(false); // the connection is the task thread's again from here
        if (claim.isHolding()) {
            // prepared in snapshotState, after the claim; the committer commits it only once this
            // checkpoint (or, at end of input, the final one) completed, which needs snapshotState
            namedBeforeClaim = claim.hasNothingHeld() ? null : openTransaction();
            return namedBeforeClaim == null ? List.of() : List.of(new PostgresCommittable(namedBeforeClaim));
        }
        if (transactionRows == 0) {
            return List.of();
        }
        return List.of(new PostgresCommittable(prepare()));
    }

    /** Logs and prepares the open transaction. */
    private TransactionId prepare() throws IOException {
        TransactionId transaction = openTransaction();
        hooks.reached(ProtocolHooks.Step.BEFORE_PREPARE, transaction);
        try (PreparedStatement log = connection.prepareStatement(insertIntoCommitLogSql);
                Statement prepare = connection.createStatement()) {
            log.setString(1, transaction.encode());
            log.setInt(2, backendPid);
            log.setString(3, sinkPrefix);
            log.setInt(4, start.subtaskIndex());
            log.setLong(5, claim.epoch());
            if (log.executeUpdate() != 1) {
                throw notLogged();
            }
            // PREPARE TRANSACTION takes no parameters; the gid is made of validated parts only.
            prepare.execute("PREPARE TRANSACTION '" + transaction.encode() + "'");
        } catch (SQLException | StaleWriterException e) {
            claim.failed(e);
            throw new IOException(writerName + " could not prepare " + transaction + ": " + e.getMessage(), e);
        }
        metrics.transactionsPrepared.inc();
        metrics.rowsPerTransaction.update(transactionRows);
        transactionRows = 0;
        // Never reuse the id, even if Flink aborts this checkpoint before snapshotState().
        nextCheckpointId++;
        hooks.reached(ProtocolHooks.Step.AFTER_PREPARE, transaction);
        return transaction;
    }

    /**
     * Why the commit-log insert of the transaction to prepare inserted nothing: another session
     * (a pooler), or a claim lost to a newer attempt (thrown: a zombie stops, its transaction is
     * never prepared and goes with its session).
     */
    private SQLException notLogged() throws SQLException {
        if (PostgresConnections.backendPid(connection) != backendPid) {
            return new SQLException(SinkRuns.transactionPoolingMessage(), "08000");
        }
        throw new StaleWriterException("its subtask index " + start.subtaskIndex() + " is no longer claimed by this"
                + " writer (epoch " + claim.epoch() + "): a newer attempt took it over, so this attempt is a zombie"
                + " and must not prepare. See 'Zombie attempts' in docs/failover.md.");
    }

    /**
     * Records the checkpoint's horizon, in as many copies as any later parallelism needs (see
     * {@link PostgresWriterState}). Runs on the task thread after {@link #prepareCommit()}, when no
     * upsert is running; the query starts no transaction.
     *
     * <p>At the first barrier, first claims with this checkpoint's id, recovers, and prepares the
     * events received so far as the transaction {@link #prepareCommit()} named. A failure here fails
     * the task (Flink fails a task whose synchronous snapshot throws), so the committer never gets
     * to commit a name that was not prepared.
     */
    @Override
    public List<PostgresWriterState> snapshotState(long checkpointId) throws IOException {
        if (claim.isHolding()) {
            claim.claimAtBarrier(checkpointId, event -> write(event, null));
            flush(false);
            if (namedBeforeClaim != null) {
                TransactionId prepared = prepare();
                if (!prepared.equals(namedBeforeClaim)) {
                    throw new IllegalStateException(writerName + " prepared " + prepared + " where it named "
                            + namedBeforeClaim);
                }
                namedBeforeClaim = null;
            }
        }
        nextCheckpointId = Math.max(nextCheckpointId, checkpointId + 1);
        return PostgresWriterState.copies(horizon(), start.parallelism(), start.maxParallelism());
    }

    /** The state of this attempt's claim ({@link WriterClaim.State}), for tests. */
    @VisibleForTesting
    public String claimState() {
        return claim.state().name();
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

    /**
     * Closes the connection, dropping queued upserts. PostgreSQL rolls back a transaction that was
     * not prepared yet; prepared ones stay for the committer (checkpoint completed) or for recovery
     * (it did not). The claim's locks go with the session. The effect worker stops; its effects in
     * flight stay queued.
     */
    @Override
    public void close() throws SQLException {
        try {
            claim.close();
            if (effects != null && inputEnded) {
                effects.closeAfterDraining();
            } else if (effects != null) {
                effects.close();
            }
            upserts.close();
            claim.releaseLocks();
        } finally {
            connection.close();
        }
    }
}
