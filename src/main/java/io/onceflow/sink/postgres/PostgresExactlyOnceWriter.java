package io.onceflow.sink.postgres;

import io.onceflow.ingest.Event;
import java.io.IOException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Collection;
import java.util.List;
import java.util.OptionalLong;
import org.apache.flink.annotation.Internal;
import org.apache.flink.api.connector.sink2.CommittingSinkWriter;
import org.apache.flink.api.connector.sink2.InitContext;
import org.apache.flink.api.connector.sink2.StatefulSinkWriter;

/**
 * Internal. The writer of {@link PostgresSink}: one database transaction per checkpoint, written in
 * batches, prepared at the checkpoint barrier and handed to the committer. It never commits.
 *
 * <p>Start-up, before anything is written: check {@code max_prepared_transactions}, create missing
 * tables, roll back the abandoned prepared transactions ({@link PreparedTransactionRecovery}), take
 * a new epoch.
 *
 * <p>Per checkpoint: rows go into the open transaction in batches of {@code batchSize}, each
 * executed by {@link BackgroundUpserts} while the task thread goes on; {@link #prepareCommit()}
 * writes the rest, waits for all of them, adds the gid to the commit log in the same transaction
 * and runs {@code PREPARE TRANSACTION}. A checkpoint without rows prepares nothing.
 *
 * <p>The checkpoint id in a gid: Flink calls {@code prepareCommit()} without telling the checkpoint
 * id, so the writer uses the id after the last one it snapshotted (or after the restored one), as
 * KafkaSink does. That is never greater than the real checkpoint id (ids only grow) and always
 * greater than every checkpoint this subtask took part in before, so for any restored checkpoint N
 * the transactions with a gid checkpoint id &gt; N are exactly those of checkpoints after N.
 * {@link StatefulSinkWriter} is implemented only to be told those ids; the writer keeps no state.
 *
 * <p>Known limit: an id written in checkpoint N and again in N+1 before N is committed waits for
 * the row lock of N's prepared transaction. The committer runs on the task thread, which waits for
 * the upserts at the next prepareCommit (or when the upsert queue is full), so the wait usually
 * ends with lock_timeout, a task failure and a restart that commits N first (correct, but slow).
 * Upstream dedup makes this practically impossible (its TTL is far longer than a checkpoint
 * interval).
 */
@Internal
final class PostgresExactlyOnceWriter
        implements CommittingSinkWriter<Event, PostgresCommittable>, StatefulSinkWriter<Event, Void> {
    private final String sinkPrefix;
    private final int subtaskIndex;
    private final String insertIntoCommitLogSql;
    private final Connection connection;
    private final BackgroundUpserts upserts;
    private final long epoch;
    private long nextCheckpointId;
    private boolean transactionHasRows;

    /**
     * @param restoredCheckpointId the checkpoint or savepoint the job restored from; empty on a fresh
     *     start
     */
    PostgresExactlyOnceWriter(PostgresSinkConfig config, int subtaskIndex, int parallelism,
            OptionalLong restoredCheckpointId) throws IOException {
        this.sinkPrefix = config.sinkPrefix();
        this.subtaskIndex = subtaskIndex;
        this.insertIntoCommitLogSql = "INSERT INTO " + config.commitLogTable() + " (gid) VALUES (?)";
        this.nextCheckpointId = restoredCheckpointId.orElse(InitContext.INITIAL_CHECKPOINT_ID - 1) + 1;
        try {
            connection = PostgresConnections.open(config, "writer-" + subtaskIndex);
        } catch (SQLException e) {
            throw new IOException("PostgreSQL sink writer " + subtaskIndex + " could not connect (" + config + ")", e);
        }
        try {
            PostgresSchema.checkMaxPreparedTransactions(connection, parallelism);
            config.schema().createIfMissing(connection);
            PreparedTransactionRecovery.rollBackAbandoned(
                    connection, sinkPrefix, restoredCheckpointId, subtaskIndex, parallelism);
            epoch = newEpoch(connection);
            connection.setAutoCommit(false);
        } catch (SQLException | RuntimeException e) {
            PostgresConnections.closeQuietly(connection, e);
            throw new IOException("PostgreSQL sink writer " + subtaskIndex + " could not start", e);
        }
        upserts = new BackgroundUpserts(new EventUpsertBatch(config.table(), config.batchSize()), connection,
                "PostgreSQL sink writer " + subtaskIndex, BackgroundUpserts.MAX_IN_FLIGHT);
    }

    /** The server's 64-bit id of a new transaction: never issued twice by one server. */
    private static long newEpoch(Connection connection) throws SQLException {
        try (Statement statement = connection.createStatement();
                ResultSet result = statement.executeQuery("SELECT pg_current_xact_id()::text::bigint")) {
            result.next();
            return result.getLong(1);
        }
    }

    @Override
    public void write(Event event, Context context) throws IOException {
        upserts.add(event);
        transactionHasRows = true;
    }

    @Override
    public void flush(boolean endOfInput) throws IOException {
        // At end of input Flink calls prepareCommit() next, for the final checkpoint.
        upserts.flush();
    }

    @Override
    public Collection<PostgresCommittable> prepareCommit() throws IOException {
        flush(false); // the connection is the task thread's again from here
        if (!transactionHasRows) {
            return List.of();
        }
        TransactionId transaction = new TransactionId(sinkPrefix, epoch, subtaskIndex, nextCheckpointId);
        ProtocolHooks.reached(ProtocolHooks.Step.BEFORE_PREPARE, transaction);
        try (PreparedStatement log = connection.prepareStatement(insertIntoCommitLogSql);
                Statement prepare = connection.createStatement()) {
            log.setString(1, transaction.encode());
            log.executeUpdate();
            // PREPARE TRANSACTION takes no parameters; the gid is made of validated parts only.
            prepare.execute("PREPARE TRANSACTION '" + transaction.encode() + "'");
        } catch (SQLException e) {
            throw new IOException("PostgreSQL sink writer " + subtaskIndex + " could not prepare " + transaction, e);
        }
        transactionHasRows = false;
        // Never reuse the id, even if Flink aborts this checkpoint before snapshotState().
        nextCheckpointId++;
        ProtocolHooks.reached(ProtocolHooks.Step.AFTER_PREPARE, transaction);
        return List.of(new PostgresCommittable(transaction));
    }

    @Override
    public List<Void> snapshotState(long checkpointId) {
        nextCheckpointId = Math.max(nextCheckpointId, checkpointId + 1);
        return List.of();
    }

    /**
     * Closes the connection, dropping queued upserts. PostgreSQL rolls back a transaction that was
     * not prepared yet; prepared ones stay for the committer (checkpoint completed) or for recovery
     * (it did not).
     */
    @Override
    public void close() throws SQLException {
        try {
            upserts.close();
        } finally {
            connection.close();
        }
    }
}
