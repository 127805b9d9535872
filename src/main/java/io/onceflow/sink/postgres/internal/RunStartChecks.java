package io.onceflow.sink.postgres.internal;

import io.onceflow.sink.postgres.options.StartMode;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalInt;
import java.util.stream.Collectors;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The checks a start makes on its connection, each a step that refuses the start with a message
 * naming what to fix: a run's before it registers ({@link SinkRuns}, the registration itself too),
 * and a writer's, which makes some of them again at every start ({@link #checkAtWriterStart}).
 */
final class RunStartChecks {
    private static final Logger LOG = LoggerFactory.getLogger(RunStartChecks.class);
    private final Connection connection;
    private final PostgresSinkConfig config;

    RunStartChecks(Connection connection, PostgresSinkConfig config) {
        this.connection = connection;
        this.config = config;
    }

    /**
     * The checks of a start that do not depend on who else uses the prefix, so that hold for a
     * second execution of one job's {@code main} too: the server encoding, no per-transaction pool,
     * enough prepared transactions, the tables (created or brought up to date), no unique index or
     * trigger that would make a checkpoint's transaction hold a lock another subtask waits for
     * ({@link BarrierLockChecks}).
     */
    void checkDatabase(int parallelism) throws SQLException {
        checkDatabase(parallelism, false);
    }

    /**
     * As {@link #checkDatabase(int)}; {@code continued}: for a run that a second execution of the
     * job's {@code main} continues, which another sink's effects queued meanwhile do not refuse.
     */
    void checkDatabase(int parallelism, boolean continued) throws SQLException {
        ServerChecks.checkServerEncoding(connection);
        requireOneSessionPerConnection(TransactionPoolerCheck.RUN_START_PROBES);
        ServerChecks.checkMaxPreparedTransactions(connection, parallelism, config.tolerableCheckpointFailures());
        if (continued) {
            config.schema().prepareContinuedRun(connection);
        } else {
            config.schema().prepareRunStart(connection);
        }
        BarrierLockChecks.check(connection, config.schema(), parallelism,
                config.tables().allowTriggersThatMayStallCheckpoints());
    }

    /**
     * The checks of a writer's start, before it takes any lock: those of {@link #checkDatabase} that
     * can change while the job runs (an index or trigger added, {@code max_prepared_transactions}
     * lowered, a pooler put in front of the server), so that a restart refuses instead of waiting for
     * ever; its locks and claims live on this session.
     */
    void checkAtWriterStart(int parallelism) throws SQLException {
        ServerChecks.checkMaxPreparedTransactions(connection, parallelism, config.tolerableCheckpointFailures());
        config.schema().prepare(connection);
        BarrierLockChecks.check(connection, config.schema(), parallelism,
                config.tables().allowTriggersThatMayStallCheckpoints());
        requireOneSessionPerConnection(TransactionPoolerCheck.WRITER_START_PROBES);
    }

    /** See {@link TransactionPoolerCheck}: a transaction pooler cannot carry the sink's sessions. */
    private void requireOneSessionPerConnection(int probes) throws SQLException {
        TransactionPoolerCheck.requireOwnSession(connection, () -> PostgresConnections.open(config, "pooler-probe"),
                probes);
    }

    /**
     * Run ids are transaction ids of the server, which only grow on one server: a run this server
     * has not issued came with a logical restore from another one, and would make every new run
     * look older than it (each start refused as a replaced job's). A run recorded with this server's
     * own system identifier is another matter: a failover to a replica that was behind, or a restored
     * copy, moved the counter back behind it (a writer recorded it again, {@link ServerChange}); the
     * start goes on, and {@link #register} numbers the new run after it.
     */
    void refuseRunsOfAnotherServer(ServerIdentity server) throws SQLException {
        try (PreparedStatement query = connection.prepareStatement(config.schema().runs().runOfAnotherServerQuery())) {
            query.setString(1, config.sinkPrefix());
            try (ResultSet result = query.executeQuery()) {
                if (!result.next()) {
                    return;
                }
                long run = result.getLong(1);
                Long system = (Long) result.getObject(2);
                if (system != null && system.equals(server.systemIdentifier())) {
                    LOG.warn("PostgreSQL sink prefix '{}' has run {} in {}, a transaction id this server has not issued"
                            + " yet, registered on this same database cluster (system {}): the server went back (a"
                            + " failover to a replica that was behind, or a restored file-level copy). The new run is"
                            + " numbered after it.", config.sinkPrefix(), run, config.tables().runs(), system);
                    return;
                }
                throw new IllegalStateException("PostgreSQL sink prefix '" + config.sinkPrefix() + "' has run " + run
                        + " in " + config.tables().runs() + ", a transaction id this server has not issued yet:"
                        + " the database was restored from a logical backup (pg_dump) of another server, and"
                        + " Flink's checkpoints are ahead of it. Follow docs/backup-restore.md, \"Resume safely\":"
                        + " clear the prefix's rows from " + config.tables().runs() + " and "
                        + config.tables().writers() + ", then start fresh with the input rewound to before the"
                        + " backup.");
            }
        }
    }

    /**
     * Registers the new run with the server's identity, and returns its id; after every effect batch
     * of the runs before it that is in flight ({@link AdvisoryLocks#runRegistrationLock}).
     */
    long register(ServerIdentity server, StartMode mode, String jobName, String flinkJobId) throws SQLException {
        try (PreparedStatement insert = connection.prepareStatement(config.schema().runs().registerStatement())) {
            insert.setString(1, config.sinkPrefix());
            insert.setString(2, config.sinkPrefix());
            insert.setString(3, jobName);
            insert.setString(4, mode.name());
            insert.setString(5, flinkJobId);
            ServerChange.setNullable(insert, 6, server.systemIdentifier());
            ServerChange.setNullable(insert, 7, server.timeline());
            insert.setInt(8, AdvisoryLocks.runRegistrationLockKey(config.sinkPrefix()));
            try (ResultSet run = insert.executeQuery()) {
                run.next();
                return run.getLong(1);
            }
        } catch (SQLException e) {
            if (SqlStates.is(e, SqlStates.LOCK_NOT_AVAILABLE)) {
                throw new IllegalStateException("PostgreSQL sink prefix '" + config.sinkPrefix() + "': the new run"
                        + " waited longer than postgres.lock.timeout for an effect batch of an earlier run to end (its"
                        + " workers, onceflow-" + config.sinkPrefix() + "-effects-<n> in pg_stat_activity, are still"
                        + " applying effects: is the earlier job still running?). Start again once they are done.", e);
            }
            throw e;
        }
    }

    /**
     * Two live jobs with one prefix would roll back each other's transactions. A writer is live from
     * its start (its session's name says whose it is), before it claims and locks anything at its
     * first barrier. Sessions whose lease expired (paused or dead writers of an earlier run) do not
     * count: the new run's writers end them.
     */
    void refuseWhileLiveWritersHoldThePrefix() throws SQLException {
        for (LockHolder holder : AdvisoryLocks.holders(connection, config.sinkPrefix(), OptionalInt.empty())) {
            if (!holder.isWriterOf(config.sinkPrefix())) {
                throw new IllegalStateException("the advisory lock key of PostgreSQL sink prefix '" + config.sinkPrefix()
                        + "' is held by another application (" + holder + "): another prefix's key collides with this"
                        + " one's, or another program uses the same advisory locks. Give this job another"
                        + " postgres.sink.prefix.");
            }
        }
        List<LockHolder> live = new ArrayList<>();
        for (LockHolder session : AdvisoryLocks.writerSessions(connection, config.sinkPrefix())) {
            if (!session.leaseExpired(config.writer().writerLease())) {
                live.add(session);
            }
        }
        if (!live.isEmpty()) {
            throw new IllegalStateException("PostgreSQL sink prefix '" + config.sinkPrefix() + "' is in use by a running"
                    + " job (" + SinkRuns.describeOwner(connection, config) + "): " + live.size() + " writer session(s)"
                    + " are connected and active: " + live + ". Two jobs with one prefix roll back each other's"
                    + " transactions. Stop that job first (with a savepoint, to resume from it), or give this job its"
                    + " own postgres.sink.prefix.");
        }
    }

    /** A fresh start would roll back the prefix's prepared transactions: refuses if there are any. */
    void refuseWhilePrepared() throws SQLException {
        List<TransactionId> prepared = PreparedTransactionRecovery.prepared(connection, config.sinkPrefix());
        if (prepared.isEmpty()) {
            return;
        }
        String previousJobId = SinkRuns.newestJobId(connection, config);
        throw new PendingTransactionsException("PostgreSQL sink prefix '" + config.sinkPrefix() + "' has "
                + prepared.size() + " prepared transaction(s) from an earlier run ("
                + SinkRuns.describeOwner(connection, config) + "): "
                + prepared.stream().limit(5).map(TransactionId::encode).collect(Collectors.joining(", "))
                + (prepared.size() > 5 ? ", ..." : "") + ". A fresh start rolls them back, and the output of the"
                + " checkpoints that completed but were not committed yet is lost (their input offsets may already"
                + " be committed to the consumer group). Resume from the earlier run's latest retained checkpoint"
                + " (flink run -s <checkpoint>), or start fresh with fresh.start.pending=discard to discard them"
                + " knowingly.", prepared.size(), previousJobId);
    }
}
