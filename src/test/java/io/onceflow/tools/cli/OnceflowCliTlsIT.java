package io.onceflow.tools.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.onceflow.cli.CannotRunException;
import io.onceflow.cli.ExitCode;
import io.onceflow.testing.SecuredPostgres;
import io.onceflow.testing.TestCertificates;
import io.onceflow.testing.TestKafka;
import io.onceflow.testing.TestPostgres.TestDatabase;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code bin/onceflow check} and {@code audit} as the documented least-privilege role over TLS
 * ({@code sslmode=verify-full}) with SCRAM ({@link SecuredPostgres}): both work, both refuse a host
 * name the server's certificate does not list (it lists only 127.0.0.1) in one line, and neither
 * shows the password.
 */
class OnceflowCliTlsIT {
    @TempDir
    static Path directory;
    private static SecuredPostgres server;
    private final TestKafka kafka = TestKafka.shared();
    private TestDatabase database;
    private SecuredPostgres.Login job;
    private String in;
    private String out;
    private String dlq;

    @BeforeAll
    static void startServer() {
        server = SecuredPostgres.start(directory.resolve("postgres"),
                TestCertificates.newAuthority(directory.resolve("ca")), "ip:127.0.0.1");
    }

    @AfterAll
    static void stopServer() {
        server.close();
    }

    @BeforeEach
    void topicsAndDatabase() throws Exception {
        in = TestKafka.uniqueTopic("tls-in");
        out = TestKafka.uniqueTopic("tls-out");
        dlq = TestKafka.uniqueTopic("tls-dlq");
        kafka.createTopics(1, in, out, dlq);
        database = server.newDatabase();
        job = server.newJobRole(database);
    }

    private String[] arguments(String command, String url, String password) {
        List<String> args = new ArrayList<>(List.of(command, "--kafka.bootstrap.servers", kafka.bootstrapServers(),
                "--input.topics", in, "--input.group.id", "tls", "--output.topic", out, "--dead.letter.topic", dlq,
                "--kafka.transactional.id.prefix", "tls", "--postgres.url", url, "--postgres.user", job.user(),
                "--postgres.password", password, "--postgres.sink.prefix", "tls"));
        if (command.equals("audit")) {
            args.addAll(List.of("--read-timeout", "30s"));
        }
        return args.toArray(String[]::new);
    }

    @Test
    void checkAndAuditWorkOverVerifyFull() throws Exception {
        String url = server.jdbcUrl(database);

        assertThat(OnceflowCli.execute(arguments("check", url, job.password()))).isEqualTo(ExitCode.CLEAN);
        assertThat(OnceflowCli.execute(arguments("audit", url, job.password()))).isEqualTo(ExitCode.CLEAN);
        database.execute("INSERT INTO onceflow_events (id, payload) VALUES ('without-input', '{}')");
        assertThat(OnceflowCli.execute(arguments("audit", url, job.password())))
                .as("the audit read the row over TLS").isEqualTo(ExitCode.FINDINGS);
    }

    @Test
    void aHostNameTheCertificateDoesNotListIsRefusedInOneLine() {
        String url = server.jdbcUrl(database, "localhost", "verify-full");
        String hostAndDatabase = url.replaceFirst("^jdbc:postgresql://", "").replaceFirst("\\?.*$", "");
        for (String command : List.of("check", "audit")) {
            assertThatThrownBy(() -> OnceflowCli.execute(arguments(command, url, job.password()))).as(command)
                    .isInstanceOfSatisfying(CannotRunException.class, e -> assertThat(e.problems()).containsExactly(
                            "postgres.url: the certificate of PostgreSQL at " + hostAndDatabase + " does not name the"
                                    + " host the URL connects to, and postgres.url asks for TLS (sslmode=verify-full)."
                                    + " Connect by a name the certificate lists (its subject alternative names), or"
                                    + " have it reissued with this name."));
        }
    }

    @Test
    void aWrongPasswordIsReportedWithoutShowingEitherPassword() {
        String wrong = "wrong-" + job.password();
        assertThatThrownBy(() -> OnceflowCli.execute(arguments("check", server.jdbcUrl(database), wrong)))
                .isInstanceOfSatisfying(CannotRunException.class, e -> assertThat(e.problems()).singleElement()
                        .asString().startsWith("postgres.password: PostgreSQL at ")
                        .contains("password authentication failed for user \"" + job.user() + "\"")
                        .doesNotContain(job.password()));
    }
}
