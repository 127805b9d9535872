package io.onceflow.sink.postgres.internal;

import java.io.IOException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Collection;
import java.util.List;
import java.util.Set;
import org.apache.flink.annotation.Internal;
import org.apache.flink.api.connector.sink2.Committer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Internal. The committer of {@code PostgresSink}. Flink calls it only for checkpoints that have
 * completed, including committables restored from a checkpoint; it runs {@code COMMIT PREPARED} on
 * its own connection (PostgreSQL wants the second phase on a connection with no transaction open),
 * and then, with an {@link EffectFunction}, tells the effect workers that the effects that
 * transaction queued can be applied ({@code pg_notify}; {@link EffectWorker}).
 *
 * <p>Idempotent: when the prepared transaction no longer exists, the commit log decides. Logged
 * means it was committed before (a restore replays committables whose commit already happened):
 * success. Not logged means it was rolled back or never prepared (or its PREPARE was lost with a
 * failover, {@link ServerChange}): its rows are lost, and the committer reports it as {@code LOST}
 * (an ERROR line naming the checkpoint and subtask to replay, the {@code transactionsLost} metric)
 * and lets the job run on, since no restart could bring the rows back. A connection-level failure (server restart,
 * dropped connection, timeout) asks Flink to retry; when Flink's retries are used up it fails the
 * task, which restarts from the last checkpoint and commits the restored committables.
 */
@Internal
public final class PostgresCommitter implements Committer<PostgresCommittable> {
    private static final Logger LOG = LoggerFactory.getLogger(PostgresCommitter.class);
    private final PostgresSinkConfig config;
    private final String isLoggedSql;
    /** Null without an effect function. */
    private final String notifyEffectsSql;
    private final PostgresSinkMetrics metrics;
    /** The Flink job whose retained checkpoints a LOST line points to. */
    private final String jobId;
    private Connection connection;

    public PostgresCommitter(PostgresSinkConfig config, PostgresSinkMetrics metrics, String jobId) {
        this.config = config;
        this.jobId = jobId;
        this.isLoggedSql = config.schema().commitLog().isLoggedQuery();
        this.notifyEffectsSql = config.tables().effectFunction() == null ? null
                : config.schema().events().queue().notifyStatement();
        this.metrics = metrics;
    }

    @Override
    public void commit(Collection<CommitRequest<PostgresCommittable>> requests) throws IOException {
        // Flink calls this when it learns that the checkpoint completed (or to retry)
        long notified = System.nanoTime();
        for (CommitRequest<PostgresCommittable> request : requests) {
            commit(request, notified);
        }
    }

    private void commit(CommitRequest<PostgresCommittable> request, long notified) throws IOException {
        TransactionId transaction = request.getCommittable().transactionId();
        config.hooks().reached(ProtocolHooks.Step.BEFORE_COMMIT, transaction);
        try {
            if (commitPrepared(transaction)) {
                metrics.commitLatencyMs.update((System.nanoTime() - notified) / 1_000_000);
                config.hooks().reached(ProtocolHooks.Step.AFTER_COMMIT, transaction);
                announceEffects();
            } else if (isLogged(transaction)) {
                LOG.info("{} was committed before (restored committable)", transaction);
                request.signalAlreadyCommitted();
            } else {
                reportLost(request, transaction);
            }
        } catch (SQLException e) {
            if (SqlStates.is(e, SqlStates.INSUFFICIENT_PRIVILEGE)) {
                SQLException wrongRole = PreparedTransactionRecovery.wrongRole(connection, transaction, "commit", e);
                throw new IOException(wrongRole.getMessage(), wrongRole);
            }
            if (!SqlStates.isTransient(e)) {
                throw new IOException("could not commit " + transaction, e);
            }
            LOG.warn("Transient failure committing {} (attempt {}), will retry: {}",
                    transaction, request.getNumberOfRetries() + 1, e.toString());
            closeConnection();
            request.retryLater();
        }
    }

    /**
     * A transaction of a completed checkpoint that is neither prepared nor logged: its rows are
     * missing, and no restart brings them back (every restore of this checkpoint finds the same).
     * So the committer reports it (an ERROR line, {@code transactionsLost}, Flink's
     * {@code failedCommittables}) and lets the job run on, instead of failing it into a restart loop.
     */
    private void reportLost(CommitRequest<PostgresCommittable> request, TransactionId transaction)
            throws SQLException {
        List<String> serverChange = ServerChange.seenByCommitter(connection(), config, transaction.epoch());
        String cause = serverChange.isEmpty()
                ? "it was rolled back (by hand, or by a second job using sink prefix '" + transaction.sinkPrefix()
                        + "'), or the database was restored to a point before this checkpoint"
                : "the PostgreSQL server changed since the run was registered (" + String.join("; ", serverChange)
                        + "): it failed over to a replica, or was restored from a copy, that never received the PREPARE";
        String message = "LOST: prepared transaction " + transaction + " of a completed checkpoint is neither"
                + " prepared nor in the commit log " + config.tables().commitLog() + ": " + cause + ". The rows that"
                + " writer subtask " + transaction.subtaskIndex() + " wrote for checkpoint "
                + transaction.checkpointId() + " are missing, and the job runs on without them. Replay that"
                + " checkpoint's input. The point to restore from: the newest retained checkpoint of Flink job "
                + jobId + " (or a savepoint of it) with an id below " + transaction.checkpointId() + ", or below the"
                + " lowest checkpoint another LOST line names (its transactions all survived, as far as the"
                + " committers can see); or start fresh with"
                + " the input rewound to before it. The table absorbs what it has already; after a database restore,"
                + " follow docs/backup-restore.md.";
        LOG.error(message);
        metrics.transactionsLost.inc();
        request.signalFailedWithKnownReason(new IOException(message));
    }

    /**
     * Wakes the effect workers listening on the sink's queue: the effects the transaction queued are
     * now visible. Only a wake-up: workers also poll, so a lost notification delays, never loses.
     */
    private void announceEffects() throws SQLException {
        if (notifyEffectsSql != null) {
            try (Statement notify = connection().createStatement()) {
                notify.execute(notifyEffectsSql);
            }
        }
    }

    /** @return false if no prepared transaction has this gid */
    private boolean commitPrepared(TransactionId transaction) throws SQLException {
        try (Statement statement = connection().createStatement()) {
            statement.execute("COMMIT PREPARED '" + transaction.encode() + "'");
            return true;
        } catch (SQLException e) {
            if (SqlStates.is(e, SqlStates.UNDEFINED_OBJECT)) {
                return false;
            }
            throw e;
        }
    }

    private boolean isLogged(TransactionId transaction) throws SQLException {
        try (PreparedStatement query = connection().prepareStatement(isLoggedSql)) {
            query.setString(1, transaction.encode());
            try (ResultSet result = query.executeQuery()) {
                return result.next();
            }
        }
    }

    private Connection connection() throws SQLException {
        if (connection == null) {
            connection = PostgresConnections.open(config, "committer");
        }
        return connection;
    }

    private void closeConnection() {
        if (connection != null) {
            try {
                connection.close();
            } catch (SQLException e) {
                LOG.debug("Closing a failed committer connection failed too", e);
            }
            connection = null;
        }
    }

    @Override
    public void close() {
        closeConnection();
    }
}
