package io.onceflow.sink.postgres.internal;

import io.onceflow.sink.postgres.options.StartMode;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.List;
import java.util.OptionalLong;
import org.apache.flink.annotation.Internal;

/**
 * Internal. Starts a run of a sink prefix: the checks that need the database before a job is
 * submitted, and the registration that makes the new job the owner of the prefix.
 *
 * <p>A run is one submission of a job (a fresh start, or a start from a savepoint or retained
 * checkpoint); Flink's own restarts within a job are not new runs. The run id is the xid of the
 * registering transaction: issued by the server, in order, never twice (after the server's counter
 * went back, the id after the newest run's: {@link ServerChange}). Writers of an older run are
 * zombies of a replaced job (see {@link WriterClaim}). The run records the server's identity
 * ({@link ServerIdentity}), so that its writers notice a failover to another copy of the database.
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
            RunStartChecks checks = new RunStartChecks(connection, config);
            checks.checkDatabase(parallelism);
            ServerIdentity server = ServerIdentity.read(connection);
            checks.refuseRunsOfAnotherServer(server);
            checks.refuseWhileLiveWritersHoldThePrefix();
            if (mode == StartMode.FRESH) {
                checks.refuseWhilePrepared();
            }
            return checks.register(server, mode, jobName, flinkJobId);
        }
    }

    /**
     * The run that the Flink job {@code flinkJobId} registered, if it registered one, after the
     * checks of {@link RunStartChecks#checkDatabase}: what a second execution of that job's {@code main}
     * continues (see {@code PostgresRunRegistry.continueRun}).
     *
     * @throws IllegalStateException if a newer run replaced it: that job must not run on
     */
    public static OptionalLong continued(PostgresSinkConfig config, int parallelism, String flinkJobId) throws SQLException {
        try (Connection connection = PostgresConnections.open(config, "run-start")) {
            new RunStartChecks(connection, config).checkDatabase(parallelism, true);
            try (PreparedStatement query = connection.prepareStatement(
                    config.schema().runs().runOfJobAndNewestRunQuery())) {
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
            config.schema().prepareRunStart(connection);
            new RunStartChecks(connection, config).refuseWhileLiveWritersHoldThePrefix();
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

    /** Why a connection through a transaction-pooling proxy cannot serve the sink, and what to do. */
    public static String transactionPoolingMessage() {
        return "the server session of one connection ran another connection's transaction, or consecutive"
                + " transactions of one connection ran in different server sessions: the connection goes"
                + " through a transaction-pooling proxy (PgBouncer with pool_mode = transaction?), which cannot carry"
                + " prepared transactions, session locks and session settings. Point postgres.url at PostgreSQL"
                + " itself or at a session-pooling proxy (pool_mode = session).";
    }

    /** E.g. "job 1f3c... of run 7301 'onceflow orders -> out', registered at ... from 10.0.0.5". */
    public static String describeOwner(Connection connection, PostgresSinkConfig config) throws SQLException {
        PostgresSchema schema = config.schema();
        try (PreparedStatement query = connection.prepareStatement(schema.runs().ownerQuery(schema.writers()))) {
            query.setString(1, config.sinkPrefix());
            try (ResultSet row = query.executeQuery()) {
                if (!row.next()) {
                    return "no run of this prefix is registered in " + config.tables().runs();
                }
                return "job " + (row.getString(1) == null ? "(id not recorded yet)" : row.getString(1)) + " of run "
                        + row.getLong(2) + " '" + row.getString(3) + "', registered at " + row.getTimestamp(4)
                        + (row.getString(5) == null ? "" : " from " + row.getString(5));
            }
        }
    }

    /** The Flink job id of the prefix's newest writer claim, or null if none was recorded. */
    static String newestJobId(Connection connection, PostgresSinkConfig config) throws SQLException {
        try (PreparedStatement query = connection.prepareStatement(config.schema().writers().newestJobIdQuery())) {
            query.setString(1, config.sinkPrefix());
            try (ResultSet row = query.executeQuery()) {
                return row.next() ? row.getString(1) : null;
            }
        }
    }

    /**
     * For writers: refuses unless {@code config}'s run is the newest of its prefix.
     *
     * @throws ReplacedRunException if a newer run was registered (this job was replaced): Flink fails
     *     the job instead of restarting it
     */
    public static void requireNewestRun(Connection connection, PostgresSinkConfig config) throws SQLException {
        requireNewestRun(connection, config, false);
    }

    /**
     * For what an effect worker or results relay commits: refuses once a newer run of the prefix is
     * registered, and keeps one from being registered until the transaction ends. Two statements: the
     * first shares the lock a registration takes ({@link AdvisoryLocks#runRegistrationLock}), the
     * second reads the newest run in a snapshot taken after that lock, so it sees any run registered
     * before. So what a replaced run commits commits before the new run exists, or is refused. A run
     * missing from the table (lost with a change of server, which the workers check for themselves)
     * is not refused here; nor is a sink without a run ({@link PostgresSinkConfig#NO_RUN}: at-least-once).
     *
     * @throws ReplacedRunException if a newer run was registered
     */
    static void refuseIfReplacedUntilCommit(Connection connection, RunsTable runs, String sinkPrefix, long run)
            throws SQLException {
        if (run == PostgresSinkConfig.NO_RUN) {
            return;
        }
        try (PreparedStatement lock = connection.prepareStatement("SELECT " + AdvisoryLocks.runRegistrationLock(true));
                PreparedStatement newest = connection.prepareStatement(runs.newestRunQuery())) {
            lock.setInt(1, AdvisoryLocks.runRegistrationLockKey(sinkPrefix));
            lock.executeQuery().close();
            newest.setString(1, sinkPrefix);
            try (ResultSet result = newest.executeQuery()) {
                result.next();
                long newestRun = result.getLong(1);
                if (newestRun > run) {
                    throw new ReplacedRunException("sink prefix '" + sinkPrefix + "' has a newer run (" + newestRun
                            + ") than this job's run " + run + ": this job was replaced, and its effect worker and"
                            + " results relay apply and publish nothing more (the newer run's do, with its settings)");
                }
            }
        }
    }

    /**
     * As {@link #requireNewestRun(Connection, PostgresSinkConfig)}, for the Kafka sinks' gate: a run
     * missing from the table (a failover to a replica that never got its row) passes there, since
     * the PostgreSQL writer decides whether to adopt it ({@link ServerChange}); only a newer run
     * refuses, and the gate must not fail the task before the writer could adopt.
     */
    public static void refuseIfReplaced(Connection connection, PostgresSinkConfig config) throws SQLException {
        requireNewestRun(connection, config, true);
    }

    /**
     * A run missing from the table was lost with a change of server, or deleted by hand; either way a
     * run submitted after a promotion is newer than it ({@link ServerChange#submittedAfterPromotion}),
     * though its id may be lower: this job was replaced.
     */
    private static void refuseIfSubmittedAfterPromotion(Connection connection, PostgresSinkConfig config)
            throws SQLException {
        ServerIdentity server = ServerIdentity.read(connection);
        OptionalLong newer = ServerChange.submittedAfterPromotion(connection, config, server);
        if (newer.isPresent()) {
            throw new ReplacedRunException("PostgreSQL sink prefix '" + config.sinkPrefix() + "' belongs to a newer"
                    + " run (" + newer.getAsLong() + ", submitted on timeline " + server.timeline() + " after a"
                    + " promotion) than this job's run " + config.run() + ", which is not in " + config.tables().runs()
                    + " (lost with the failover, or deleted by hand): this job was replaced by a new submission, and"
                    + " it stops without touching the database or Kafka's transactions.");
        }
    }

    private static void requireNewestRun(Connection connection, PostgresSinkConfig config, boolean missingPasses)
            throws SQLException {
        try (PreparedStatement query = connection.prepareStatement(config.schema().runs().newestRunQuery())) {
            query.setString(1, config.sinkPrefix());
            try (ResultSet result = query.executeQuery()) {
                result.next();
                long newest = result.getLong(1);
                boolean missing = result.wasNull() || newest < config.run();
                if (missing) {
                    refuseIfSubmittedAfterPromotion(connection, config);
                }
                if (missing && missingPasses) {
                    return;
                }
                if (missing) {
                    throw new IllegalStateException("run " + config.run() + " of PostgreSQL sink prefix '"
                            + config.sinkPrefix() + "' is not in " + config.tables().runs() + ": were rows deleted by hand?"
                            + " Submit the job again, so that it registers a new run.");
                }
                if (newest > config.run()) {
                    throw new ReplacedRunException("PostgreSQL sink prefix '" + config.sinkPrefix() + "' belongs to a"
                            + " newer run (" + describeOwner(connection, config) + ") than this job's run "
                            + config.run() + ": this job was replaced by a new submission, and it stops without"
                            + " touching the database or Kafka's transactions. If this job should still run, another"
                            + " job uses its postgres.sink.prefix: give each job its own.");
                }
            }
        }
    }
}
