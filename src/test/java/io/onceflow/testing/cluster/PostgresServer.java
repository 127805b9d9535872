package io.onceflow.testing.cluster;

import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * A PostgreSQL 17 server (zonky's binaries from Maven; the server is its own process) whose data
 * directory belongs to the harness, so it can be stopped and started again on the same port and data,
 * and is deleted with the harness. {@code max_prepared_transactions} is set for two-phase commit.
 */
public final class PostgresServer implements AutoCloseable {
    /** The job's PostgreSQL sink prepares one transaction per subtask and pending checkpoint. */
    public static final int MAX_PREPARED_TRANSACTIONS = 64;

    private final Path dataDirectory;
    private int port;
    private EmbeddedPostgres server;

    private PostgresServer(Path dataDirectory) {
        this.dataDirectory = dataDirectory;
    }

    public static PostgresServer start(Path dataDirectory) {
        PostgresServer postgres = new PostgresServer(dataDirectory);
        postgres.startServer();
        postgres.port = postgres.server.getPort();
        return postgres;
    }

    private void startServer() {
        EmbeddedPostgres.Builder builder = EmbeddedPostgres.builder()
                .setDataDirectory(dataDirectory)
                .setCleanDataDirectory(false) // the data must survive restart(); the harness deletes it
                .setServerConfig("max_prepared_transactions", String.valueOf(MAX_PREPARED_TRANSACTIONS))
                .setServerConfig("max_connections", "200");
        if (port > 0) {
            builder.setPort(port);
        }
        try {
            server = builder.start();
        } catch (IOException e) {
            throw new IllegalStateException("could not start PostgreSQL in " + dataDirectory, e);
        }
    }

    /** The JDBC URL of the {@code postgres} database, for the job's {@code postgres.url}. */
    public String jdbcUrl() {
        return "jdbc:postgresql://127.0.0.1:" + port + "/postgres";
    }

    public String user() {
        return "postgres";
    }

    /** A connection as the superuser to the {@code postgres} database. */
    public Connection connect() throws SQLException {
        return DriverManager.getConnection(jdbcUrl(), user(), "");
    }

    /** Runs {@code statements} as the superuser, in the {@code postgres} database. */
    public void execute(String... statements) {
        try (Connection connection = connect(); Statement statement = connection.createStatement()) {
            for (String sql : statements) {
                statement.execute(sql);
            }
        } catch (SQLException e) {
            throw new IllegalStateException("could not run " + String.join("; ", statements), e);
        }
    }

    /** Runs {@code query} as the superuser; each row's columns joined by single spaces. */
    public List<String> rows(String query) {
        try (Connection connection = connect();
                Statement statement = connection.createStatement();
                ResultSet result = statement.executeQuery(query)) {
            List<String> rows = new ArrayList<>();
            while (result.next()) {
                StringBuilder row = new StringBuilder();
                for (int column = 1; column <= result.getMetaData().getColumnCount(); column++) {
                    row.append(column > 1 ? " " : "").append(result.getString(column));
                }
                rows.add(row.toString());
            }
            return rows;
        } catch (SQLException e) {
            throw new IllegalStateException("could not run " + query, e);
        }
    }

    /**
     * Stops the server (clients see their connections drop; prepared transactions survive, as on a
     * real server) and starts it again on the same port and data.
     */
    public void restart() {
        stopServer();
        startServer();
    }

    private void stopServer() {
        if (server != null) {
            try {
                server.close();
            } catch (IOException e) {
                throw new IllegalStateException("PostgreSQL did not stop", e);
            } finally {
                server = null;
            }
        }
    }

    @Override
    public void close() {
        stopServer();
    }
}
