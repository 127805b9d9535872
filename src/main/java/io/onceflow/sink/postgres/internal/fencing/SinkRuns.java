package io.onceflow.sink.postgres.internal.fencing;

import io.onceflow.sink.postgres.PendingTransactionsException;
import io.onceflow.sink.postgres.PostgresSink;
import io.onceflow.sink.postgres.StartMode;
import io.onceflow.sink.postgres.internal.PostgresConnections;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.commit.PreparedTransactionRecovery;
import io.onceflow.sink.postgres.internal.commit.TransactionId;
import io.onceflow.sink.postgres.internal.schema.PostgresSchema;
import io.onceflow.sink.postgres.internal.schema.ServerChecks;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalInt;
import java.util.OptionalLong;
import java.util.stream.Collectors;
import org.apache.flink.annotation.Internal;

/**
 * Internal. Starts a run of a sink prefix: the checks that need the database before a job is
 * submitted, and the registration that makes the new job the owner of the prefix.
 *
 * <p>A run is one submission of a job (a fresh start, or a start from a savepoint or retained
 * checkpoint); Flink's own restarts within a job are not new runs. The run id is the xid of the
 * registering transaction: issued by the server, in order, never twice. Writers of an older run are
 * zombies of a replaced job (see {@link WriterFence}).
 */
@Internal
public final class SinkRuns {
    private SinkRuns() {}

    /**
     * @return the new run's id
     * @throws IllegalStateException naming what to fix: the server encoding, a per-transaction
     *     connection pool, too few prepared transactions, another live job using the prefix
     * @throws PendingTransactionsException on a {@link StartMode#FRESH} start when the prefix has
     *     prepared transactions
     */
    public static long start(PostgresSinkConfig config, int parallelism, StartMode mode, String jobName, String flinkJobId)
            throws SQLException {
        try (Connection connection = PostgresConnections.open(config, "run-start")) {
            checkDatabase(connection, config, parallelism);
            refuseWhileLiveWritersHoldThePrefix(connection, config);
            if (mode == StartMode.FRESH) {
                refuseWhilePrepared(connection, config);
            }
            return register(connection, config, mode, jobName, flinkJobId);
        }
    }

    /**
     * The checks of a start that do not depend on who else uses the prefix, so that hold for a
     * second execution of one job's {@code main} too: the server encoding, no per-transaction pool,
     * enough prepared transactions, the tables (created or brought up to date), no unique index
     * that would deadlock subtasks.
     */
    private static void checkDatabase(Connection connection, PostgresSinkConfig config, int parallelism)
            throws SQLException {
        ServerChecks.checkServerEncoding(connection);
        requireOneSessionPerConnection(connection);
        ServerChecks.checkMaxPreparedTransactions(connection, parallelism, config.tolerableCheckpointFailures());
        config.schema().prepare(connection);
        refuseUniqueIndexesAcrossSubtasks(connection, config, parallelism);
    }

    /**
     * The run that the Flink job {@code flinkJobId} registered, if it registered one, after the
     * checks of {@link #checkDatabase}: what a second execution of that job's {@code main}
     * continues (see {@link PostgresSink#continueRun}).
     *
     * @throws IllegalStateException if a newer run replaced it: that job must not run on
     */
    public static OptionalLong continued(PostgresSinkConfig config, int parallelism, String flinkJobId) throws SQLException {
        try (Connection connection = PostgresConnections.open(config, "run-start")) {
            checkDatabase(connection, config, parallelism);
            try (PreparedStatement query = connection.prepareStatement("SELECT max(run) FILTER (WHERE flink_job_id = ?),"
                    + " max(run) FROM " + config.runsTable() + " WHERE sink_prefix = ?")) {
                query.setString(1, flinkJobId);
                query.setString(2, config.sinkPrefix());
                try (ResultSet result = query.executeQuery()) {
                    result.next();
                    long run = result.getLong(1);
                    if (result.wasNull()) {
                        return OptionalLong.empty();
                    }
                    if (result.getLong(2) > run) {
                        // Its writers would stop at requireNewestRun, but its Kafka writers, restarting in
                        // a loop, would abort the newer job's transactions of the same prefix.
                        throw new IllegalStateException("Flink job " + flinkJobId + " registered run " + run
                                + " of PostgreSQL sink prefix '" + config.sinkPrefix() + "', which a newer run replaced ("
                                + describeOwner(connection, config) + "): this job was replaced and must not run on."
                                + " Cancel it; if it should run, give the other job its own prefixes.");
                    }
                    return OptionalLong.of(run);
                }
            }
        }
    }

    /**
     * The checks of an at-least-once start: its writers commit each batch and never prepare, so
     * they can neither commit nor roll back what an earlier exactly-once run of the prefix left
     * prepared. Left alone, those transactions would hold their rows' locks for good (every later
     * write of those ids times out) and the rows of the last completed checkpoint would never
     * appear. So such a start refuses, or with {@code discardPending} rolls them back.
     *
     * @throws PendingTransactionsException if the prefix has prepared transactions and
     *     {@code discardPending} is false
     */
    public static void startAtLeastOnce(PostgresSinkConfig config, boolean discardPending) throws SQLException {
        try (Connection connection = PostgresConnections.open(config, "run-start")) {
            ServerChecks.checkServerEncoding(connection);
            config.schema().prepare(connection);
            refuseWhileLiveWritersHoldThePrefix(connection, config);
            List<TransactionId> prepared = PreparedTransactionRecovery.prepared(connection, config.sinkPrefix());
            if (prepared.isEmpty()) {
                return;
            }
            if (!discardPending) {
                throw new PendingTransactionsException("PostgreSQL sink prefix '" + config.sinkPrefix() + "' has "
                        + prepared.size() + " prepared transaction(s) of an earlier exactly-once run ("
                        + describeOwner(connection, config) + "), which the at-least-once sink can neither commit nor"
                        + " roll back: they would hold their rows' locks for good, and the output of the last"
                        + " completed checkpoint would never appear. Resume that run in exactly-once mode from its"
                        + " latest retained checkpoint and stop it with a savepoint (flink stop) before switching to"
                        + " at-least-once, or discard them knowingly with fresh.start.pending=discard.",
                        prepared.size(), newestJobId(connection, config));
            }
            PreparedTransactionRecovery.rollBackAbandoned(connection, prepared, OptionalLong.empty(),
                    OptionalLong.empty(), "at-least-once start");
        }
    }

    /**
     * A unique index or exclusion constraint of the user's on the events table besides the primary
     * key would stop an exactly-once job for good: two ids that share its key, written by two
     * subtasks within one checkpoint, wait for each other's transaction, which commits only after
     * the checkpoint completes, which waits for the blocked subtask. Each replay repeats it. With one
     * writer subtask the second row is refused like any other (the rejects table) instead.
     */
    private static void refuseUniqueIndexesAcrossSubtasks(Connection connection, PostgresSinkConfig config,
            int parallelism) throws SQLException {
        if (parallelism <= 1) {
            return;
        }
        List<String> indexes = new ArrayList<>();
        try (PreparedStatement query = connection.prepareStatement("SELECT i.indexrelid::regclass::text FROM pg_index i"
                + " WHERE i.indrelid = to_regclass(?) AND (i.indisunique OR i.indisexclusion) AND NOT i.indisprimary")) {
            query.setString(1, config.table());
            try (ResultSet rows = query.executeQuery()) {
                while (rows.next()) {
                    indexes.add(rows.getString(1));
                }
            }
        }
        if (!indexes.isEmpty()) {
            throw new IllegalStateException("the table " + config.table() + " has unique index(es) or exclusion"
                    + " constraint(s) besides its primary key: " + indexes + ". With parallelism " + parallelism
                    + " two message ids that share such a key, written by two subtasks between two checkpoints, wait"
                    + " for each other's transaction until the job fails, on every replay. Drop them and enforce the"
                    + " rule downstream (e.g. in an effect function's own table), or run the sink with parallelism 1.");
        }
    }

    /**
     * A transaction-pooling proxy (PgBouncer's {@code pool_mode = transaction}) hands each
     * transaction to any server session: it cannot carry prepared transactions' owners, session
     * locks or session settings. Two autocommit statements on different backends give it away (a
     * proxy that happens to reuse the backend is caught at the first PREPARE instead).
     */
    private static void requireOneSessionPerConnection(Connection connection) throws SQLException {
        int first = backendPid(connection);
        int second = backendPid(connection);
        if (first != second) {
            throw new IllegalStateException(transactionPoolingMessage());
        }
    }

    public static String transactionPoolingMessage() {
        return "consecutive transactions of one connection ran in different server sessions: the connection goes"
                + " through a transaction-pooling proxy (PgBouncer with pool_mode = transaction?), which cannot carry"
                + " prepared transactions, session locks and session settings. Point postgres.url at PostgreSQL"
                + " itself or at a session-pooling proxy (pool_mode = session).";
    }

    private static int backendPid(Connection connection) throws SQLException {
        try (PreparedStatement query = connection.prepareStatement("SELECT pg_backend_pid()");
                ResultSet result = query.executeQuery()) {
            result.next();
            return result.getInt(1);
        }
    }

    /**
     * Two live jobs with one prefix would roll back each other's transactions. Sessions whose lease
     * expired (paused or dead writers of an earlier run) do not count: the new run's writers end them.
     */
    private static void refuseWhileLiveWritersHoldThePrefix(Connection connection, PostgresSinkConfig config)
            throws SQLException {
        List<WriterFence.LockHolder> live = new ArrayList<>();
        String ownApplicationName = PostgresConnections.applicationName(config.sinkPrefix(), "writer-");
        for (WriterFence.LockHolder holder : WriterFence.holders(connection, config.sinkPrefix(), OptionalInt.empty())) {
            if (holder.applicationName() == null || !holder.applicationName().startsWith(ownApplicationName)) {
                throw new IllegalStateException("the advisory lock key of PostgreSQL sink prefix '" + config.sinkPrefix()
                        + "' is held by another application (" + holder + "): another prefix's key collides with this"
                        + " one's, or another program uses the same advisory locks. Give this job another"
                        + " postgres.sink.prefix.");
            }
            if (!holder.leaseExpired(config.writerLease())) {
                live.add(holder);
            }
        }
        if (!live.isEmpty()) {
            throw new IllegalStateException("PostgreSQL sink prefix '" + config.sinkPrefix() + "' is in use by a running"
                    + " job (" + describeOwner(connection, config) + "): " + live.size() + " writer session(s) are"
                    + " connected and active: " + live + ". Two jobs with one prefix roll back each other's"
                    + " transactions. Stop that job first (with a savepoint, to resume from it), or give this job its"
                    + " own postgres.sink.prefix.");
        }
    }

    /** E.g. "job 1f3c... of run 7301 'onceflow orders -> out', registered at ... from 10.0.0.5". */
    public static String describeOwner(Connection connection, PostgresSinkConfig config) throws SQLException {
        try (PreparedStatement query = connection.prepareStatement(
                "SELECT w.job_id, r.run, r.job_name, r.registered_at, r.registered_from FROM " + config.runsTable()
                        + " r LEFT JOIN " + config.writersTable() + " w ON w.sink_prefix = r.sink_prefix AND w.run = r.run"
                        + " WHERE r.sink_prefix = ? ORDER BY r.run DESC, w.claimed_at DESC LIMIT 1")) {
            query.setString(1, config.sinkPrefix());
            try (ResultSet row = query.executeQuery()) {
                if (!row.next()) {
                    return "no run of this prefix is registered in " + config.runsTable();
                }
                return "job " + (row.getString(1) == null ? "(id not recorded yet)" : row.getString(1)) + " of run "
                        + row.getLong(2) + " '" + row.getString(3) + "', registered at " + row.getTimestamp(4)
                        + (row.getString(5) == null ? "" : " from " + row.getString(5));
            }
        }
    }

    private static void refuseWhilePrepared(Connection connection, PostgresSinkConfig config) throws SQLException {
        List<TransactionId> prepared = PreparedTransactionRecovery.prepared(connection, config.sinkPrefix());
        if (prepared.isEmpty()) {
            return;
        }
        String previousJobId = newestJobId(connection, config);
        throw new PendingTransactionsException("PostgreSQL sink prefix '" + config.sinkPrefix() + "' has "
                + prepared.size() + " prepared transaction(s) from an earlier run ("
                + describeOwner(connection, config) + "): "
                + prepared.stream().limit(5).map(TransactionId::encode).collect(Collectors.joining(", "))
                + (prepared.size() > 5 ? ", ..." : "") + ". A fresh start rolls them back, and the output of the"
                + " checkpoints that completed but were not committed yet is lost (their input offsets may already"
                + " be committed to the consumer group). Resume from the earlier run's latest retained checkpoint"
                + " (flink run -s <checkpoint>), or start fresh with fresh.start.pending=discard to discard them"
                + " knowingly.", prepared.size(), previousJobId);
    }

    private static String newestJobId(Connection connection, PostgresSinkConfig config) throws SQLException {
        try (PreparedStatement query = connection.prepareStatement("SELECT job_id FROM " + config.writersTable()
                + " WHERE sink_prefix = ? ORDER BY run DESC, claimed_at DESC LIMIT 1")) {
            query.setString(1, config.sinkPrefix());
            try (ResultSet row = query.executeQuery()) {
                return row.next() ? row.getString(1) : null;
            }
        }
    }

    private static long register(Connection connection, PostgresSinkConfig config, StartMode mode, String jobName,
            String flinkJobId) throws SQLException {
        try (PreparedStatement insert = connection.prepareStatement("INSERT INTO " + config.runsTable()
                + " (sink_prefix, run, job_name, start_mode, registered_from, flink_job_id)"
                + " VALUES (?, pg_current_xact_id()::text::bigint, ?, ?, host(inet_client_addr()), ?) RETURNING run")) {
            insert.setString(1, config.sinkPrefix());
            insert.setString(2, jobName);
            insert.setString(3, mode.name());
            insert.setString(4, flinkJobId);
            try (ResultSet run = insert.executeQuery()) {
                run.next();
                return run.getLong(1);
            }
        }
    }

    /**
     * For writers: refuses unless {@code config}'s run is the newest of its prefix.
     *
     * @throws StaleWriterException if a newer run was registered (this job was replaced)
     */
    public static void requireNewestRun(Connection connection, PostgresSinkConfig config) throws SQLException {
        try (PreparedStatement query = connection.prepareStatement(
                "SELECT max(run) FROM " + config.runsTable() + " WHERE sink_prefix = ?")) {
            query.setString(1, config.sinkPrefix());
            try (ResultSet result = query.executeQuery()) {
                result.next();
                long newest = result.getLong(1);
                if (result.wasNull() || newest < config.run()) {
                    throw new IllegalStateException("run " + config.run() + " of PostgreSQL sink prefix '"
                            + config.sinkPrefix() + "' is not in " + config.runsTable() + ": were rows deleted by hand?"
                            + " Submit the job again, so that it registers a new run.");
                }
                if (newest > config.run()) {
                    throw new StaleWriterException("PostgreSQL sink prefix '" + config.sinkPrefix() + "' belongs to a"
                            + " newer run (" + describeOwner(connection, config) + ") than this job's run "
                            + config.run() + ": this job was replaced by a new submission, and this attempt stops"
                            + " without touching the database. If this job should still run, another job uses its"
                            + " postgres.sink.prefix: give each job its own.");
                }
            }
        }
    }
}
