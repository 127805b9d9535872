package io.onceflow.sink.postgres.internal;

import io.onceflow.sink.postgres.options.PostgresConnectionOptions;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.Properties;
import org.apache.flink.annotation.Internal;
import org.postgresql.Driver;
import org.postgresql.PGProperty;

/**
 * Internal. Opens the sink's connections and pins, on every one, the session settings the sink
 * relies on. Role and database defaults ({@code ALTER ROLE ... SET}) are not ours: a DBA's
 * {@code idle_in_transaction_session_timeout = '1s'} would kill a writer between two batches, a
 * {@code transaction_timeout} would kill every checkpoint's transaction, {@code serializable} would
 * turn concurrent upserts into serialization failures. So each connection sets:
 *
 * <ul>
 *   <li>{@code lock_timeout} and {@code statement_timeout}: a mistake (a row locked by a forgotten
 *       prepared transaction, a network partition) becomes a task failure and a restart, never a
 *       hang; plus a client socket timeout for a server that no longer answers;
 *   <li>{@code idle_in_transaction_session_timeout}, {@code idle_session_timeout} and (PostgreSQL
 *       17+) {@code transaction_timeout} to 0: a writer's transaction legitimately lasts a whole
 *       checkpoint interval and its session a whole job;
 *   <li>{@code default_transaction_isolation = 'read committed'} and
 *       {@code default_transaction_read_only = off}: what the upsert and the commit log assume;
 *   <li>{@code synchronous_commit = on} where a default turned it {@code off}: an acknowledged
 *       at-least-once batch or commit-log row must survive a server crash.
 * </ul>
 */
@Internal
public final class PostgresConnections {
    /** How much longer than statement_timeout the client waits for a reply before giving up. */
    private static final Duration SOCKET_TIMEOUT_MARGIN = Duration.ofSeconds(30);
    /** The driver's default, kept explicit. */
    private static final Duration DEFAULT_CONNECT_TIMEOUT = Duration.ofSeconds(10);
    /** {@code transaction_timeout} exists from PostgreSQL 17 on. */
    private static final int TRANSACTION_TIMEOUT_SINCE = 170_000;

    private PostgresConnections() {}

    /**
     * @param role shown in {@code pg_stat_activity.application_name}, e.g. {@code writer-3}
     * @return a connection in autocommit mode
     */
    public static Connection open(PostgresSinkConfig config, String role) throws SQLException {
        String applicationName = applicationName(config.sinkPrefix(), role);
        Connection connection = connect(config.connection(), applicationName,
                config.writer().statementTimeout().plus(SOCKET_TIMEOUT_MARGIN), DEFAULT_CONNECT_TIMEOUT);
        try {
            pinSessionSettings(connection, config, applicationName);
        } catch (SQLException e) {
            closeQuietly(connection, e);
            throw e;
        }
        return connection;
    }

    /**
     * Opens a session, for the sink ({@link #open}) and for the tools that read the database (the
     * preflight, the audit), which pin their own session settings: every wait on the network is
     * bounded, and server errors keep their DETAIL out of exceptions.
     *
     * @param socketTimeout the longest wait for a reply; also bounds the login
     * @return a connection in autocommit mode
     */
    public static Connection connect(PostgresConnectionOptions options, String applicationName,
            Duration socketTimeout, Duration connectTimeout) throws SQLException {
        Properties properties = new Properties();
        PGProperty.USER.set(properties, options.user());
        PGProperty.PASSWORD.set(properties, options.password());
        PGProperty.APPLICATION_NAME.set(properties, applicationName);
        PGProperty.TCP_KEEP_ALIVE.set(properties, true);
        PGProperty.CONNECT_TIMEOUT.set(properties, (int) Math.max(1, connectTimeout.toSeconds()));
        PGProperty.LOGIN_TIMEOUT.set(properties, (int) Math.max(1, socketTimeout.toSeconds()));
        PGProperty.SOCKET_TIMEOUT.set(properties, (int) Math.max(1, socketTimeout.toSeconds()));
        // Server messages stay in exceptions, their DETAIL (which quotes the failing row) does not:
        // exceptions reach logs, and a rejected row is recorded in the rejects table anyway.
        PGProperty.LOG_SERVER_ERROR_DETAIL.set(properties, false);
        // The driver directly, not DriverManager: DriverManager does not see drivers that Flink's
        // child-first user-code class loader loaded.
        Connection connection = new Driver().connect(options.jdbcUrl(), properties);
        if (connection == null) {
            throw new SQLException("not a PostgreSQL JDBC URL: " + options.jdbcUrl(), "08001");
        }
        return connection;
    }

    private static void pinSessionSettings(Connection connection, PostgresSinkConfig config, String applicationName)
            throws SQLException {
        // again here: an ApplicationName in the URL overrides the property, and the fence and the
        // run-start check find a prefix's writers by this name
        try (PreparedStatement name = connection.prepareStatement("SELECT set_config('application_name', ?, false)")) {
            name.setString(1, applicationName);
            name.executeQuery().close();
        }
        try (Statement statement = connection.createStatement()) {
            StringBuilder tuned = new StringBuilder();
            config.writer().sessionSettings().forEach((name, value) ->
                    tuned.append("SET ").append(name).append(" = ").append(value).append("; "));
            String pins = tuned + "SET idle_in_transaction_session_timeout = 0"
                    + "; SET idle_session_timeout = 0"
                    + "; SET default_transaction_isolation = 'read committed'"
                    + "; SET default_transaction_read_only = off";
            statement.execute(pins);
            int serverVersion;
            String synchronousCommit;
            try (ResultSet server = statement.executeQuery("SELECT current_setting('server_version_num')::int,"
                    + " current_setting('synchronous_commit')")) {
                server.next();
                serverVersion = server.getInt(1);
                synchronousCommit = server.getString(2);
            }
            if (serverVersion >= TRANSACTION_TIMEOUT_SINCE) {
                statement.execute("SET transaction_timeout = 0");
            }
            if ("off".equals(synchronousCommit)) {
                statement.execute("SET synchronous_commit = on");
            }
        }
    }

    /** The server process of {@code connection}'s session (of its current transaction, through a pooler). */
    public static int backendPid(Connection connection) throws SQLException {
        try (Statement statement = connection.createStatement();
                ResultSet result = statement.executeQuery("SELECT pg_backend_pid()")) {
            result.next();
            return result.getInt(1);
        }
    }

    /**
     * {@code onceflow-<prefix>-<role>}: at most 9 + 40 + 1 + 12 characters, under PostgreSQL's 63.
     * The fence reads it back to tell its own sessions from others (see {@link WriterClaim}).
     */
    public static String applicationName(String sinkPrefix, String role) {
        return "onceflow" + (sinkPrefix == null ? "" : "-" + sinkPrefix) + "-" + role;
    }

    /** Work on a connection, for {@link #inTransaction}. */
    @FunctionalInterface
    public interface SqlWork {
        void run() throws SQLException;
    }

    /**
     * Runs {@code work} as one transaction of its own on a connection in autocommit mode: commits
     * it, or rolls it back and rethrows. Leaves the connection in autocommit mode, unless it broke.
     */
    public static void inTransaction(Connection connection, SqlWork work) throws SQLException {
        connection.setAutoCommit(false);
        try {
            work.run();
            connection.commit();
        } catch (SQLException | RuntimeException | Error e) {
            try {
                connection.rollback();
                connection.setAutoCommit(true);
            } catch (SQLException rollbackFailure) {
                e.addSuppressed(rollbackFailure);
            }
            throw e;
        }
        connection.setAutoCommit(true);
    }

    /** Closes {@code connection} after {@code failure}, keeping any close error as suppressed. */
    public static void closeQuietly(Connection connection, Throwable failure) {
        try {
            connection.close();
        } catch (SQLException e) {
            failure.addSuppressed(e);
        }
    }
}
