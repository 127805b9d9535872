package io.onceflow.preflight;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.config.OnceflowConfig;
import io.onceflow.config.ValidSettings;
import io.onceflow.testing.DocumentedGrants;
import io.onceflow.testing.SecuredPostgres;
import io.onceflow.testing.TestCertificates;
import io.onceflow.testing.TestPostgres;
import io.onceflow.testing.TestPostgres.TestDatabase;
import io.onceflow.testing.TlsTerminatingProxy;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The checks before a start against a real server with TLS and SCRAM ({@link SecuredPostgres}) and
 * the documented least-privilege role: verify-full passes; a server without TLS, a certificate that
 * does not name the host or was not signed by sslrootcert, and TLS that ends before the server are
 * each one line that says so; a wrong password keeps its message and is never shown. The server's
 * certificate names only 127.0.0.1, so that a URL to localhost is a name it does not list.
 */
class PostgresPreflightTlsTest {
    @TempDir
    static Path directory;
    private static TestCertificates authority;
    private static SecuredPostgres server;
    private static TestDatabase database;
    private static SecuredPostgres.Login job;

    @BeforeAll
    static void startServer() throws Exception {
        authority = TestCertificates.newAuthority(directory.resolve("ca"));
        server = SecuredPostgres.start(directory.resolve("postgres"), authority, "ip:127.0.0.1");
        database = server.newDatabase();
        job = server.newJobRole(database);
    }

    @AfterAll
    static void stopServer() {
        server.close();
    }

    private static List<String> problems(Map<String, String> postgres, Preflight.Purpose purpose) {
        Map<String, String> settings = ValidSettings.required();
        settings.put("postgres.sink.prefix", "tls");
        settings.putAll(postgres);
        List<String> problems = new PostgresPreflight(OnceflowConfig.fromMap(settings, Map.of()).postgres().orElseThrow(),
                purpose).problems();
        assertThat(problems).noneMatch(problem -> problem.contains(job.password()));
        return problems;
    }

    /** As the documented role, with the effect function its grants name. */
    private static List<String> problems(String url, String password, Preflight.Purpose purpose) {
        return problems(Map.of("postgres.url", url, "postgres.user", job.user(), "postgres.password", password,
                "postgres.effect.function", DocumentedGrants.EFFECT), purpose);
    }

    private static List<String> problems(String url) {
        return problems(url, job.password(), Preflight.Purpose.RUN_JOB);
    }

    /** As the superuser of {@code plain}, a database of the shared server (no TLS, trust). */
    private static List<String> problems(TestDatabase plain, String url) {
        return problems(Map.of("postgres.url", url, "postgres.user", plain.user(), "postgres.password",
                plain.password()), Preflight.Purpose.RUN_JOB);
    }

    private static String at() {
        return "PostgreSQL at " + database.jdbcUrl().replaceFirst("^jdbc:postgresql://", "");
    }

    @Test
    void verifyFullWithTheDocumentedRolePassesForTheJobAndTheAudit() {
        assertThat(problems(server.jdbcUrl(database))).isEmpty();
        assertThat(problems(server.jdbcUrl(database), job.password(), Preflight.Purpose.AUDIT)).isEmpty();
    }

    @Test
    void aWrongScramPasswordKeepsItsMessage() {
        assertThat(problems(server.jdbcUrl(database), "wrong-" + job.password(), Preflight.Purpose.RUN_JOB))
                .containsExactly("postgres.password: " + at() + " refused the login of user '" + job.user()
                        + "' (FATAL: password authentication failed for user \"" + job.user() + "\"). Check"
                        + " postgres.user and postgres.password, and that pg_hba.conf admits this host.");
    }

    @Test
    void theServerRefusesTheRoleWithoutTls() {
        assertThat(problems(server.jdbcUrl(database, "127.0.0.1", "disable"))).singleElement().asString()
                .startsWith("postgres.password: " + at() + " refused the login of user '" + job.user()
                        + "' (FATAL: pg_hba.conf rejects connection for host \"127.0.0.1\"")
                .contains("no encryption");
    }

    @Test
    void aCertificateThatDoesNotNameTheHostIsRefused() {
        String url = server.jdbcUrl(database, "localhost", "verify-full");
        assertThat(problems(url)).containsExactly("postgres.url: the certificate of PostgreSQL at "
                + at().substring("PostgreSQL at ".length()).replace("127.0.0.1", "localhost")
                + " does not name the host the URL connects to, and postgres.url asks for TLS (sslmode=verify-full)."
                + " Connect by a name the certificate lists (its subject alternative names), or have it reissued"
                + " with this name.");
    }

    @Test
    void aCertificateOfAnotherAuthorityIsRefused() {
        TestCertificates other = TestCertificates.newAuthority(directory.resolve("other-ca"));
        String url = server.jdbcUrl(database).replace(authority.caPem().toString(), other.caPem().toString());
        assertThat(problems(url)).singleElement().asString()
                .startsWith("postgres.url: the certificate of " + at() + " did not verify against sslrootcert="
                        + other.caPem() + " (")
                .endsWith("), and postgres.url asks for TLS (sslmode=verify-full). Set sslrootcert to the PEM file of"
                        + " the CA that signed the server's certificate.");
    }

    @Test
    void aMissingRootCertificateIsNamed() {
        Path missing = directory.resolve("no-such-ca.pem");
        String url = server.jdbcUrl(database).replace(authority.caPem().toString(), missing.toString());
        assertThat(problems(url)).containsExactly("postgres.url: cannot read sslrootcert=" + missing + ", and"
                + " postgres.url asks for TLS (sslmode=verify-full). Set sslrootcert to the PEM file of the CA that"
                + " signed the server's certificate, present at that path on the JobManager and every TaskManager.");
    }

    @Test
    void aServerWithoutTlsIsRefusedWhenTheUrlAsksForIt() {
        TestDatabase plain = TestPostgres.shared().newDatabase();
        String url = plain.jdbcUrl().replaceFirst("\\?.*$", "");
        for (String tls : new String[] {"sslmode=require", "ssl=true"}) {
            assertThat(problems(plain, url + "?" + tls)).as(tls)
                    .containsExactly("postgres.url: PostgreSQL at " + url.replaceFirst("^jdbc:postgresql://", "")
                            + " does not offer TLS, and postgres.url asks for TLS ("
                            + (tls.equals("ssl=true") ? "ssl=true, i.e. sslmode=verify-full" : "sslmode=require")
                            + "). Turn TLS on at the server (ssl = on, ssl_cert_file and ssl_key_file in"
                            + " postgresql.conf) or connect to one that has it; do not lower sslmode.");
        }
    }

    @Test
    void tlsThatEndsBeforeTheServerIsRefused() throws Exception {
        TestDatabase plain = TestPostgres.shared().newDatabase();
        try (TlsTerminatingProxy proxy = TlsTerminatingProxy.start(
                authority.issueServerCertificate("proxy", "ip:127.0.0.1"), plain)) {
            String url = proxy.jdbcUrl(plain, authority);
            assertThat(problems(plain, url)).containsExactly(
                    "postgres.url: postgres.url asks for TLS (sslmode=verify-full) but PostgreSQL at "
                            + url.replaceFirst("^jdbc:postgresql://", "").replaceFirst("\\?.*$", "")
                            + " sees this session unencrypted (pg_stat_ssl): something on the way, a pooler or proxy,"
                            + " ends TLS and forwards plain text. Connect to PostgreSQL directly, or have the pooler"
                            + " use TLS to the server too.");
        }
    }
}
