package io.onceflow.sink.postgres;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.Properties;
import org.apache.flink.annotation.Internal;
import org.postgresql.Driver;
import org.postgresql.PGProperty;

/**
 * Internal. Opens the sink's connections. Every one bounds every wait, so that a mistake (a row
 * locked by a forgotten prepared transaction, a network partition) becomes a task failure and a
 * restart, never a hang: {@code lock_timeout} and {@code statement_timeout} on the server, and a
 * socket timeout on the client for a server that no longer answers.
 */
@Internal
final class PostgresConnections {
    /** How much longer than statement_timeout the client waits for a reply before giving up. */
    private static final Duration SOCKET_TIMEOUT_MARGIN = Duration.ofSeconds(30);

    private PostgresConnections() {}

    /**
     * @param role shown in {@code pg_stat_activity.application_name}, e.g. {@code writer-3}
     * @return a connection in autocommit mode
     */
    static Connection open(PostgresSinkConfig config, String role) throws SQLException {
        Properties properties = new Properties();
        PGProperty.USER.set(properties, config.user());
        PGProperty.PASSWORD.set(properties, config.password());
        PGProperty.APPLICATION_NAME.set(properties, applicationName(config, role));
        PGProperty.TCP_KEEP_ALIVE.set(properties, true);
        PGProperty.SOCKET_TIMEOUT.set(properties,
                (int) config.statementTimeout().plus(SOCKET_TIMEOUT_MARGIN).toSeconds());
        // The driver directly, not DriverManager: DriverManager does not see drivers that Flink's
        // child-first user-code class loader loaded.
        Connection connection = new Driver().connect(config.jdbcUrl(), properties);
        if (connection == null) {
            throw new SQLException("not a PostgreSQL JDBC URL: " + config.jdbcUrl(), "08001");
        }
        try (Statement statement = connection.createStatement()) {
            statement.execute("SET lock_timeout = " + config.lockTimeout().toMillis());
            statement.execute("SET statement_timeout = " + config.statementTimeout().toMillis());
        } catch (SQLException e) {
            closeQuietly(connection, e);
            throw e;
        }
        return connection;
    }

    private static String applicationName(PostgresSinkConfig config, String role) {
        return "onceflow" + (config.sinkPrefix() == null ? "" : "-" + config.sinkPrefix()) + "-" + role;
    }

    /** Closes {@code connection} after {@code failure}, keeping any close error as suppressed. */
    static void closeQuietly(Connection connection, Exception failure) {
        try {
            connection.close();
        } catch (SQLException e) {
            failure.addSuppressed(e);
        }
    }
}
