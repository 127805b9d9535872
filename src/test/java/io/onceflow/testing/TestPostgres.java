package io.onceflow.testing;

import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.UUID;
import java.util.stream.Stream;
import org.apache.flink.util.FileUtils;

/**
 * The one PostgreSQL fixture of the tests: a real PostgreSQL 17 server run from zonky's Maven
 * binaries (a process of its own), with {@code max_prepared_transactions} set for two-phase commit.
 * Two ways to get one:
 * <ul>
 *   <li>{@link #shared()}: the server of this JVM that tests and the demo talk to, or an external one
 *       when {@value #EXTERNAL_URL_ENV} is set (with {@value #EXTERNAL_USER_ENV} and
 *       {@value #EXTERNAL_PASSWORD_ENV}). Each test takes its own database from {@link #newDatabase()}
 *       so tests never see each other's rows. Stopped when the JVM exits.
 *   <li>{@link #start(Path)}: a server of the caller's own (the cluster harness), in a data directory
 *       the caller deletes, stopped by {@link #close()}.
 * </ul>
 * Either can be {@link #restart() restarted} on the same data directory and port (embedded only).
 */
public final class TestPostgres implements AutoCloseable {
    /** A JDBC URL of an existing database, e.g. {@code jdbc:postgresql://db:5432/postgres}. */
    public static final String EXTERNAL_URL_ENV = "ONCEFLOW_TEST_POSTGRES_URL";
    public static final String EXTERNAL_USER_ENV = "ONCEFLOW_TEST_POSTGRES_USER";
    public static final String EXTERNAL_PASSWORD_ENV = "ONCEFLOW_TEST_POSTGRES_PASSWORD";
    /**
     * Two-phase commit needs prepared transactions; PostgreSQL's default of 0 forbids them. The job's
     * PostgreSQL sink prepares one transaction per subtask and pending checkpoint.
     */
    public static final int MAX_PREPARED_TRANSACTIONS = 64;
    /**
     * Set to {@code true} (before the first {@link #shared()}) for a shared embedded server with
     * PostgreSQL's own durability defaults, {@code fsync} and {@code synchronous_commit} on: what the
     * benchmark measures. Unset, tests get a faster server that may lose committed transactions in an
     * OS crash (never in a server crash, which is all that {@link #restart()} simulates).
     */
    public static final String DURABLE_PROPERTY = "onceflow.test.postgres.durable";
    private static final String SUPERUSER = "postgres";

    private static TestPostgres shared;

    private final TestDatabase admin;
    /** Server settings beyond {@link #builder}'s; null for an external server. */
    private final Map<String, String> serverSettings;
    private Path dataDirectory;
    private final int port;
    private EmbeddedPostgres embedded;

    private TestPostgres(TestDatabase admin, Map<String, String> serverSettings, Path dataDirectory, int port,
            EmbeddedPostgres embedded) {
        this.admin = admin;
        this.serverSettings = serverSettings;
        this.dataDirectory = dataDirectory;
        this.port = port;
        this.embedded = embedded;
    }

    /** The server of this JVM, started on first call. Never closed by its users: it stops with the JVM. */
    public static synchronized TestPostgres shared() {
        if (shared == null) {
            String url = System.getenv(EXTERNAL_URL_ENV);
            if (url != null && !url.isBlank()) {
                shared = new TestPostgres(new TestDatabase(url, envOr(EXTERNAL_USER_ENV, SUPERUSER),
                        envOr(EXTERNAL_PASSWORD_ENV, "")), null, null, -1, null);
            } else {
                shared = startShared();
            }
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                try {
                    shared.stop();
                } catch (IllegalStateException e) {
                    System.err.println("embedded PostgreSQL did not stop cleanly: " + e.getCause());
                } finally {
                    // 1.3-1.9 GB per test JVM: left to the machine's tmp cleanup, a day of runs filled the disk
                    if (shared.dataDirectory != null) {
                        FileUtils.deleteDirectoryQuietly(shared.dataDirectory.toFile());
                    }
                }
            }, "test-postgres-shutdown"));
        }
        return shared;
    }

    private static String envOr(String name, String fallback) {
        String value = System.getenv(name);
        return value == null ? fallback : value;
    }

    private static TestPostgres startShared() {
        // zonky turns synchronous_commit off by default: durable means both settings back on
        String durable = Boolean.getBoolean(DURABLE_PROPERTY) ? "on" : "off";
        Map<String, String> settings = Map.of("fsync", durable, "synchronous_commit", durable);
        Path dataDirectory;
        try {
            // kept across restart(); deleted when the JVM exits
            dataDirectory = Files.createTempDirectory("onceflow-postgres");
        } catch (IOException e) {
            throw new IllegalStateException("could not start the embedded PostgreSQL server", e);
        }
        EmbeddedPostgres server = startEmbedded(dataDirectory, 0, settings);
        return new TestPostgres(new TestDatabase(server.getJdbcUrl(SUPERUSER, "postgres"), SUPERUSER, ""), settings,
                dataDirectory, server.getPort(), server);
    }

    /**
     * Starts a server of the caller's own in {@code dataDirectory}, which the caller deletes after
     * {@link #close()}; zonky's defaults otherwise ({@code fsync} and {@code synchronous_commit} off, whatever
     * {@value #DURABLE_PROPERTY} says).
     * Its {@link #jdbcUrl()} names no user: {@code jdbc:postgresql://127.0.0.1:port/postgres}.
     */
    public static TestPostgres start(Path dataDirectory) {
        return start(dataDirectory, Map.of());
    }

    /**
     * As {@link #start(Path)}, with server settings of the caller's (e.g. {@code ssl}, {@code hba_file}),
     * kept across {@link #restart()}.
     */
    public static TestPostgres start(Path dataDirectory, Map<String, String> serverSettings) {
        EmbeddedPostgres server = startEmbedded(dataDirectory, 0, serverSettings);
        String url = "jdbc:postgresql://127.0.0.1:" + server.getPort() + "/postgres";
        return new TestPostgres(new TestDatabase(url, SUPERUSER, ""), serverSettings, dataDirectory, server.getPort(),
                server);
    }

    private static final Duration STARTUP_WAIT = Duration.ofMinutes(2);

    private static EmbeddedPostgres startEmbedded(Path dataDirectory, int port, Map<String, String> settings) {
        EmbeddedPostgres.Builder builder = EmbeddedPostgres.builder()
                .setDataDirectory(dataDirectory)
                .setCleanDataDirectory(false) // the data must survive restart()
                .setServerConfig("max_prepared_transactions", String.valueOf(MAX_PREPARED_TRANSACTIONS))
                .setServerConfig("max_connections", "200")
                // zonky waits 10 s by default: a restart's crash recovery on a loaded 2-core machine (a CI
                // run's chaos suite next to another cluster) took longer, and the test failed, not the sink
                .setPGStartupWait(STARTUP_WAIT);
        settings.forEach(builder::setServerConfig);
        if (port > 0) {
            builder.setPort(port);
        }
        try {
            return builder.start();
        } catch (IOException e) {
            throw new IllegalStateException("could not start PostgreSQL in " + dataDirectory, e);
        }
    }

    /**
     * A file-level copy of a stopped server's data directory (what a physical backup restores, or a
     * replica holds when it is promoted while behind).
     */
    public static void copyDataDirectory(Path from, Path to) throws IOException {
        try (Stream<Path> files = Files.walk(from)) {
            files.forEach(file -> {
                try {
                    Files.copy(file, to.resolve(from.relativize(file).toString()), StandardCopyOption.COPY_ATTRIBUTES);
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            });
        }
    }

    /** The JDBC URL of the server's {@code postgres} database (or the external one), e.g. for the job's {@code postgres.url}. */
    public String jdbcUrl() {
        return admin.jdbcUrl();
    }

    public String user() {
        return admin.user();
    }

    /** A connection as the superuser to the {@code postgres} database. */
    public Connection connect() throws SQLException {
        return admin.connect();
    }

    /** Runs {@code statements} as the superuser, in the {@code postgres} database. */
    public void execute(String... statements) {
        try {
            admin.execute(statements);
        } catch (SQLException e) {
            throw new IllegalStateException("could not run " + String.join("; ", statements), e);
        }
    }

    /** Runs {@code query} as the superuser; each row's columns joined by single spaces. */
    public List<String> rows(String query) {
        try {
            return admin.rows(query);
        } catch (SQLException e) {
            throw new IllegalStateException("could not run " + query, e);
        }
    }

    /** Creates an empty database and returns how to reach it. */
    public TestDatabase newDatabase() {
        String name = "onceflow_" + UUID.randomUUID().toString().replace("-", "").substring(0, 12)
                .toLowerCase(Locale.ROOT);
        try {
            admin.execute("CREATE DATABASE " + name);
        } catch (SQLException e) {
            throw new IllegalStateException("could not create database " + name, e);
        }
        return new TestDatabase(admin.jdbcUrl().replaceFirst("/[^/?]*(\\?.*)?$", "/" + name + "$1"), admin.user(),
                admin.password());
    }

    /** Whether {@link #restart()} works: only for an embedded server, not an external one. */
    public boolean canRestart() {
        return serverSettings != null;
    }

    /**
     * Stops the embedded server as a crash would look to clients (connections drop) and starts it
     * again on the same data directory and port. Prepared transactions survive, as they must.
     */
    public synchronized void restart() {
        if (!canRestart()) {
            throw new UnsupportedOperationException("restart() needs the embedded server; "
                    + EXTERNAL_URL_ENV + " points at an external one");
        }
        stop();
        embedded = startEmbedded(dataDirectory, port, serverSettings);
    }

    /**
     * Stops the server cleanly, copies its data directory to {@code copy} ({@link #copyDataDirectory})
     * and starts it again on the same port: a replica, or a backup, as it stands now.
     */
    public synchronized void copyTo(Path copy) throws IOException {
        stop();
        copyDataDirectory(dataDirectory, copy);
        embedded = startEmbedded(dataDirectory, port, serverSettings);
    }

    /**
     * Stops the server as a crash would look to clients and starts the copy in {@code copy} in its
     * place, on the same port: a failover to a replica that was behind, or a restored backup, as
     * the clients see it (the same address, the same system identifier, an earlier state).
     */
    public synchronized void failOverTo(Path copy) {
        stop();
        dataDirectory = copy;
        embedded = startEmbedded(copy, port, serverSettings);
    }

    /**
     * As {@link #failOverTo}, and the copy is promoted as a replica is: it starts as a standby and
     * {@code pg_promote()} ends its recovery on a new timeline.
     */
    public synchronized void failOverToPromoted(Path copy) throws IOException {
        Files.createFile(copy.resolve("standby.signal"));
        failOverTo(copy);
        execute("SELECT pg_promote()");
    }

    /** Stops a server of {@link #start(Path)}; the shared one stops with the JVM. */
    @Override
    public void close() {
        if (this == shared) {
            throw new UnsupportedOperationException("the shared server stops with the JVM");
        }
        stop();
    }

    private synchronized void stop() {
        if (embedded != null) {
            try {
                embedded.close();
            } catch (IOException e) {
                throw new IllegalStateException("PostgreSQL did not stop", e);
            } finally {
                embedded = null;
            }
        }
    }

    /** How to reach one database, and what tests do in it. */
    public record TestDatabase(String jdbcUrl, String user, String password) {
        public Connection connect() throws SQLException {
            return DriverManager.getConnection(jdbcUrl, user, password);
        }

        /** Runs {@code statements}, each in its own transaction (autocommit). */
        public void execute(String... statements) throws SQLException {
            try (Connection connection = connect(); Statement statement = connection.createStatement()) {
                for (String sql : statements) {
                    statement.execute(sql);
                }
            }
        }

        /** Hands each row of {@code query} to {@code consumer}. */
        public void query(String query, RowConsumer consumer) throws SQLException {
            try (Connection connection = connect();
                    Statement statement = connection.createStatement();
                    ResultSet rows = statement.executeQuery(query)) {
                while (rows.next()) {
                    consumer.accept(rows);
                }
            }
        }

        /** The rows of {@code query}, each row's columns joined by single spaces. */
        public List<String> rows(String query) throws SQLException {
            List<String> rows = new ArrayList<>();
            query(query, row -> {
                StringBuilder line = new StringBuilder();
                for (int column = 1; column <= row.getMetaData().getColumnCount(); column++) {
                    line.append(column > 1 ? " " : "").append(row.getString(column));
                }
                rows.add(line.toString());
            });
            return rows;
        }
    }

    /** What a test does with one row of a query. */
    @FunctionalInterface
    public interface RowConsumer {
        void accept(ResultSet row) throws SQLException;
    }
}
