package io.onceflow.testing;

import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Locale;
import java.util.UUID;

/**
 * The PostgreSQL server that tests and the demo talk to: a real PostgreSQL 17 server run from
 * zonky's Maven binaries, or an external one when {@value #EXTERNAL_URL_ENV} is set (with
 * {@value #EXTERNAL_USER_ENV} and {@value #EXTERNAL_PASSWORD_ENV}). One per JVM. Each test takes
 * its own database from {@link #newDatabase()} so tests never see each other's rows.
 */
public final class TestPostgres {
    /** A JDBC URL of an existing database, e.g. {@code jdbc:postgresql://db:5432/postgres}. */
    public static final String EXTERNAL_URL_ENV = "ONCEFLOW_TEST_POSTGRES_URL";
    public static final String EXTERNAL_USER_ENV = "ONCEFLOW_TEST_POSTGRES_USER";
    public static final String EXTERNAL_PASSWORD_ENV = "ONCEFLOW_TEST_POSTGRES_PASSWORD";
    /** Two-phase commit needs prepared transactions; PostgreSQL's default of 0 forbids them. */
    public static final int MAX_PREPARED_TRANSACTIONS = 64;
    /**
     * Set to {@code true} (before the first {@link #shared()}) for an embedded server with PostgreSQL's
     * own durability defaults, {@code fsync} and {@code synchronous_commit} on: what the benchmark
     * measures. Unset, tests get a faster server that may lose committed transactions in an OS crash
     * (never in a server crash, which is all that {@link #restart()} simulates).
     */
    public static final String DURABLE_PROPERTY = "onceflow.test.postgres.durable";

    private static TestPostgres shared;

    private final String adminUrl;
    private final String user;
    private final String password;
    private final Path dataDirectory;
    private final int port;
    private EmbeddedPostgres embedded;

    private TestPostgres(String adminUrl, String user, String password, Path dataDirectory, int port,
            EmbeddedPostgres embedded) {
        this.adminUrl = adminUrl;
        this.user = user;
        this.password = password;
        this.dataDirectory = dataDirectory;
        this.port = port;
        this.embedded = embedded;
    }

    /** The server of this JVM, started on first call. */
    public static synchronized TestPostgres shared() {
        if (shared == null) {
            String url = System.getenv(EXTERNAL_URL_ENV);
            if (url != null && !url.isBlank()) {
                shared = new TestPostgres(url, envOr(EXTERNAL_USER_ENV, "postgres"),
                        envOr(EXTERNAL_PASSWORD_ENV, ""), null, -1, null);
            } else {
                shared = startEmbedded();
            }
            Runtime.getRuntime().addShutdownHook(new Thread(shared::stop, "test-postgres-shutdown"));
        }
        return shared;
    }

    private static String envOr(String name, String fallback) {
        String value = System.getenv(name);
        return value == null ? fallback : value;
    }

    private static TestPostgres startEmbedded() {
        try {
            Path dataDirectory = Files.createTempDirectory("onceflow-postgres");
            EmbeddedPostgres server = builder(dataDirectory, 0).start();
            return new TestPostgres(server.getJdbcUrl("postgres", "postgres"), "postgres", "",
                    dataDirectory, server.getPort(), server);
        } catch (IOException e) {
            throw new IllegalStateException("could not start the embedded PostgreSQL server", e);
        }
    }

    private static EmbeddedPostgres.Builder builder(Path dataDirectory, int port) {
        EmbeddedPostgres.Builder builder = EmbeddedPostgres.builder()
                .setDataDirectory(dataDirectory)
                // kept across restart(); the temp directory goes with the machine's tmp cleanup
                .setCleanDataDirectory(false)
                .setServerConfig("max_prepared_transactions", String.valueOf(MAX_PREPARED_TRANSACTIONS))
                .setServerConfig("max_connections", "200");
        // zonky turns synchronous_commit off by default: durable means both settings back on
        boolean durable = Boolean.getBoolean(DURABLE_PROPERTY);
        builder.setServerConfig("fsync", durable ? "on" : "off")
                .setServerConfig("synchronous_commit", durable ? "on" : "off");
        return port > 0 ? builder.setPort(port) : builder;
    }

    /** Creates an empty database and returns how to reach it. */
    public TestDatabase newDatabase() {
        String name = "onceflow_" + UUID.randomUUID().toString().replace("-", "").substring(0, 12)
                .toLowerCase(Locale.ROOT);
        try (Connection connection = DriverManager.getConnection(adminUrl, user, password);
                Statement statement = connection.createStatement()) {
            statement.execute("CREATE DATABASE " + name);
        } catch (SQLException e) {
            throw new IllegalStateException("could not create database " + name, e);
        }
        return new TestDatabase(adminUrl.replaceFirst("/[^/?]*(\\?.*)?$", "/" + name + "$1"), user, password);
    }

    /** Whether {@link #restart()} works: only for the embedded server, not an external one. */
    public boolean canRestart() {
        return embedded != null;
    }

    /**
     * Stops the embedded server as a crash would look to clients (connections drop) and starts it
     * again on the same data directory and port. Prepared transactions survive, as they must.
     */
    public synchronized void restart() {
        if (embedded == null) {
            throw new UnsupportedOperationException("restart() needs the embedded server; "
                    + EXTERNAL_URL_ENV + " points at an external one");
        }
        stop();
        try {
            embedded = builder(dataDirectory, port).start();
        } catch (IOException e) {
            throw new IllegalStateException("could not restart the embedded PostgreSQL server", e);
        }
    }

    private synchronized void stop() {
        if (embedded != null) {
            try {
                embedded.close();
            } catch (IOException e) {
                System.err.println("embedded PostgreSQL did not stop cleanly: " + e);
            }
        }
    }

    /** How to reach one test database. */
    public record TestDatabase(String jdbcUrl, String user, String password) {
        public Connection connect() throws SQLException {
            return DriverManager.getConnection(jdbcUrl, user, password);
        }
    }
}
