package io.onceflow.testing;

import io.onceflow.testing.TestPostgres.TestDatabase;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.SQLException;
import java.util.Map;
import java.util.UUID;
import org.apache.flink.util.FileUtils;

/**
 * A PostgreSQL 17 server set up as docs/security.md asks of production: TLS with a certificate of a
 * {@link TestCertificates} authority, and a {@code pg_hba.conf} that admits the job's roles only over
 * TLS with SCRAM ({@code password_encryption = scram-sha-256}) and rejects them without TLS. The
 * tests of {@code sslmode=verify-full} need a real server that enforces both, not a driver setting.
 *
 * <p>Only the superuser {@code postgres} logs in without TLS or password (trust, from the loopback
 * address and the local socket): zonky's start-up check does, and so does the setup here
 * ({@link #newDatabase()}, {@link #newJobRole}). Started by {@link #start}, a {@link TestPostgres} of
 * its own underneath; {@link #close()} stops it and deletes its directory.
 */
public final class SecuredPostgres implements AutoCloseable {
    /** The names {@link #start(Path, TestCertificates)}'s certificate is valid for. */
    public static final String[] LOOPBACK_NAMES = {"ip:127.0.0.1", "dns:localhost"};

    private static final String HBA = """
            # the superuser, without TLS or password: zonky's start-up check and the fixture's setup
            local     all  postgres                 trust
            host      all  postgres  127.0.0.1/32   trust
            host      all  postgres  ::1/128        trust
            # every other role: TLS and SCRAM, never without TLS
            hostssl   all  all       all            scram-sha-256
            hostnossl all  all       all            reject
            """;

    private final Path directory;
    private final TestCertificates authority;
    private final TestPostgres server;

    private SecuredPostgres(Path directory, TestCertificates authority, TestPostgres server) {
        this.directory = directory;
        this.authority = authority;
        this.server = server;
    }

    /** Starts a server with a certificate for 127.0.0.1 and localhost ({@link #LOOPBACK_NAMES}). */
    public static SecuredPostgres start(Path directory, TestCertificates authority) {
        return start(directory, authority, LOOPBACK_NAMES);
    }

    /**
     * Starts a server in {@code directory} (its data, its pg_hba.conf) whose certificate, issued by
     * {@code authority}, names only {@code subjectAlternativeNames} (e.g. {@code ip:127.0.0.1}).
     */
    public static SecuredPostgres start(Path directory, TestCertificates authority,
            String... subjectAlternativeNames) {
        TestCertificates.ServerCertificate certificate = authority.issueServerCertificate("postgres",
                subjectAlternativeNames);
        Path dataDirectory = directory.resolve("data");
        Path hba = directory.resolve("pg_hba.conf");
        try {
            Files.createDirectories(dataDirectory);
            Files.writeString(hba, HBA);
        } catch (IOException e) {
            throw new IllegalStateException("could not prepare " + directory, e);
        }
        TestPostgres server = TestPostgres.start(dataDirectory, Map.of(
                "ssl", "on",
                "ssl_cert_file", certificate.certificatePem().toString(),
                "ssl_key_file", certificate.privateKeyPem().toString(),
                "hba_file", hba.toString(),
                "password_encryption", "scram-sha-256"));
        return new SecuredPostgres(directory, authority, server);
    }

    /** A new empty database; its {@link TestDatabase} connects as the superuser. */
    public TestDatabase newDatabase() {
        return server.newDatabase();
    }

    /**
     * Creates in {@code database} the tables and the job's role with exactly the grants of
     * docs/deploy.md ({@link DocumentedGrants}), and gives the role a password (stored as a SCRAM
     * verifier).
     *
     * @return the role and its password
     */
    public Login newJobRole(TestDatabase database) throws SQLException, IOException {
        String role = DocumentedGrants.apply(database);
        String password = "pw-" + UUID.randomUUID();
        database.execute("ALTER ROLE " + role + " PASSWORD '" + password + "'");
        return new Login(role, password);
    }

    /** {@code database}'s URL at 127.0.0.1 with {@code sslmode=verify-full} and this authority's root certificate. */
    public String jdbcUrl(TestDatabase database) {
        return jdbcUrl(database, "127.0.0.1", "verify-full");
    }

    /** {@code database}'s URL at {@code host} (e.g. {@code localhost}) with {@code sslmode} and the root certificate. */
    public String jdbcUrl(TestDatabase database, String host, String sslmode) {
        return database.jdbcUrl().replace("//127.0.0.1:", "//" + host + ":") + "?sslmode=" + sslmode
                + "&sslrootcert=" + authority.caPem();
    }

    /** The superuser's view of the server, e.g. to read {@code pg_stat_ssl}. */
    public TestPostgres server() {
        return server;
    }

    /** Stops the server and deletes its directory. */
    @Override
    public void close() {
        try {
            server.close();
        } finally {
            FileUtils.deleteDirectoryQuietly(directory.toFile());
        }
    }

    /** A role that logs in with a password. */
    public record Login(String user, String password) {
        @Override
        public String toString() {
            return user; // never the password
        }
    }
}
