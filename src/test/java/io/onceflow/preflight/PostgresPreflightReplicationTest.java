package io.onceflow.preflight;

import static io.onceflow.testing.TestStandby.awaitSyncState;
import static io.onceflow.testing.TestStandby.primaryWithCopy;
import static io.onceflow.testing.TestStandby.startStandby;
import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.config.OnceflowConfig;
import io.onceflow.sink.postgres.internal.ServerChecks.ReplicationRisk;
import io.onceflow.testing.TestPostgres;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A PostgreSQL server that streams to replicas its commits do not wait for is refused by the start
 * check, unless {@code postgres.accept.commit.loss.on.failover=true}; then it is warned about.
 */
class PostgresPreflightReplicationTest {
    private static final ReplicationRisk ASYNC = new ReplicationRisk(
            "the PostgreSQL server streams to 1 asynchronous replica(s) of 1 (replica_b at 10.0.0.2)",
            "A failover ... see docs/failover.md.",
            "Make the replicas a failover may promote synchronous: name them in synchronous_standby_names (now '')"
                    + " and keep synchronous_commit = on or remote_apply.");

    @TempDir
    Path directory;

    @Test
    void aRiskIsOneProblemLineNamingTheReplicasTheFixAndTheOptIn() {
        assertThat(PostgresPreflight.replicationProblem(Optional.of(ASYNC), "db:5432/payments", false)).contains(
                "postgres.url: at db:5432/payments, the PostgreSQL server streams to 1 asynchronous replica(s) of 1"
                        + " (replica_b at 10.0.0.2): a failover to one that is behind can lose acknowledged commits and"
                        + " prepared transactions of completed checkpoints. Make the replicas a failover may promote"
                        + " synchronous: name them in synchronous_standby_names (now '') and keep synchronous_commit ="
                        + " on or remote_apply. Or, to accept that loss, set"
                        + " postgres.accept.commit.loss.on.failover=true (docs/failover.md).");
    }

    @Test
    void anAcceptedRiskOrNoneIsNoProblem() {
        assertThat(PostgresPreflight.replicationProblem(Optional.of(ASYNC), "db:5432/payments", true)).isEmpty();
        assertThat(PostgresPreflight.replicationProblem(Optional.empty(), "db:5432/payments", false)).isEmpty();
    }

    @Test
    void theOptInIsOffByDefault() {
        Map<String, String> settings = settings("jdbc:postgresql://db:5432/payments", "onceflow");
        assertThat(OnceflowConfig.fromMap(settings, Map.of()).postgres().orElseThrow().acceptCommitLossOnFailover())
                .isFalse();
        settings.put("postgres.accept.commit.loss.on.failover", "true");
        assertThat(OnceflowConfig.fromMap(settings, Map.of()).postgres().orElseThrow().acceptCommitLossOnFailover())
                .isTrue();
    }

    @Test
    void aRealAsynchronousStandbyIsRefusedUnlessAcceptedAndASynchronousOneIsNot() throws Exception {
        Path standbyData = directory.resolve("standby");
        try (TestPostgres primary = primaryWithCopy(directory.resolve("primary"), standbyData);
                TestPostgres standby = startStandby(standbyData, primary)) {
            awaitSyncState(primary, "async");
            Map<String, String> settings = settings(primary.jdbcUrl(), primary.user());
            String server = primary.jdbcUrl().replaceFirst("^jdbc:postgresql://", "");

            assertThat(problems(settings)).singleElement().asString()
                    .startsWith("postgres.url: at " + server + ", the PostgreSQL server streams to 1 asynchronous"
                            + " replica(s) of 1 (walreceiver at 127.0.0.1): a failover")
                    .endsWith("Or, to accept that loss, set postgres.accept.commit.loss.on.failover=true"
                            + " (docs/failover.md).");

            settings.put("postgres.accept.commit.loss.on.failover", "true");
            assertThat(problems(settings)).as("accepted: a warning only").isEmpty();

            settings.remove("postgres.accept.commit.loss.on.failover");
            primary.execute("ALTER SYSTEM SET synchronous_standby_names = '*'", "SELECT pg_reload_conf()");
            awaitSyncState(primary, "sync");
            assertThat(problems(settings)).as("synchronous").isEmpty();
        }
    }

    private static Map<String, String> settings(String url, String user) {
        Map<String, String> settings = new HashMap<>(Map.of("kafka.bootstrap.servers", "kafka:9092", "input.topics",
                "in", "input.group.id", "g", "output.topic", "out", "dead.letter.topic", "dlq",
                "kafka.transactional.id.prefix", "p", "postgres.sink.prefix", "replicas", "postgres.url", url,
                "postgres.user", user));
        settings.put("postgres.password", "");
        return settings;
    }

    private static List<String> problems(Map<String, String> settings) {
        return new PostgresPreflight(OnceflowConfig.fromMap(settings, Map.of()).postgres().orElseThrow(),
                Preflight.Purpose.RUN_JOB).problems();
    }
}
