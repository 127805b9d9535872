package io.onceflow.sink.postgres;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.EffectWorker;
import io.onceflow.testing.DocumentedGrants;
import io.onceflow.testing.Eventually;
import io.onceflow.testing.SecuredPostgres;
import io.onceflow.testing.TestCertificates;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The exactly-once sink and its effect worker as the documented least-privilege role over TLS
 * ({@code sslmode=verify-full}) with SCRAM ({@link SecuredPostgres}, whose pg_hba.conf refuses that
 * role without TLS): the run's registration, the writer, the committer and the worker each open their
 * connections with the URL's TLS parameters, and every id is committed once.
 */
class PostgresSinkTlsTest {
    @TempDir
    Path directory;

    @Test
    void anExactlyOnceCheckpointAndItsEffectsCommitOverVerifyFullAndScram() throws Exception {
        try (SecuredPostgres server = SecuredPostgres.start(directory.resolve("postgres"),
                TestCertificates.newAuthority(directory.resolve("ca")))) {
            SinkDatabase db = new SinkDatabase(server.newDatabase());
            SecuredPostgres.Login job = server.newJobRole(db.database);
            PostgresSinkConfig config = SinkDatabase.config(db.builder("tls")
                    .setJdbcUrl(server.jdbcUrl(db.database))
                    .setUser(job.user())
                    .setPassword(job.password())
                    .setEffectFunction(DocumentedGrants.EFFECT));

            db.commitFreshCheckpoint(config, SinkDatabase.event("a"), SinkDatabase.event("b"), SinkDatabase.event("c"));
            try (EffectWorker worker = EffectWorker.startIfConfigured(config, 0, 1, PostgresSinkMetrics.unregistered())) {
                Eventually.await("the effects applied by the worker", Duration.ofSeconds(30),
                        () -> db.queuedEffects() == 0);
            }

            assertThat(db.deliveriesById()).isEqualTo(Map.of("a", 1, "b", 1, "c", 1));
            assertThat(db.effectStatuses()).isEqualTo(Map.of("a", "applied", "b", "applied", "c", "applied"));
        }
    }
}
