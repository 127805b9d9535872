package io.onceflow.sink.postgres;

import static io.onceflow.sink.postgres.PostgresTwoPhaseCommitTest.checkpoint;
import static io.onceflow.sink.postgres.PostgresTwoPhaseCommitTest.commit;
import static io.onceflow.testing.TestStandby.awaitSyncState;
import static io.onceflow.testing.TestStandby.primaryWithCopy;
import static io.onceflow.testing.TestStandby.startStandby;
import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.PostgresCommittable;
import io.onceflow.sink.postgres.internal.ServerChecks;
import io.onceflow.sink.postgres.internal.PostgresExactlyOnceWriter;
import io.onceflow.sink.postgres.internal.WriterStart;
import io.onceflow.testing.Eventually;
import io.onceflow.testing.TestPostgres;
import io.onceflow.testing.TestStandby;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A primary with a real streaming replica ({@link TestStandby}): what the start finds about
 * asynchronous replicas (which it refuses unless accepted, and then warns about:
 * io.onceflow.preflight.PostgresPreflightReplicationTest), and a promotion, whose new timeline the
 * writers notice.
 */
class ReplicationTest {
    private static final Duration REPLICATION = Duration.ofSeconds(30);

    @TempDir
    Path directory;

    @Test
    void anAsynchronousReplicaIsWarnedAboutAndASynchronousOneIsNot() throws Exception {
        Path standbyData = directory.resolve("standby");
        try (TestPostgres primary = primaryWithCopy(directory.resolve("primary"), standbyData);
                TestPostgres standby = startStandby(standbyData, primary)) {
            awaitSyncState(primary, "async");
            primary.execute("CREATE ROLE plain LOGIN");

            assertThat(warning(primary, primary.user())).get().asString()
                    .contains("streams to 1 asynchronous replica(s) of 1", "synchronous_standby_names");
            assertThat(warning(primary, "plain")).as("a role without pg_monitor cannot see the state").get()
                    .asString().contains("1 replica(s) whose replication state this role may not see");

            primary.execute("ALTER SYSTEM SET synchronous_standby_names = '*'", "SELECT pg_reload_conf()");
            awaitSyncState(primary, "sync");
            assertThat(warning(primary, primary.user())).isEmpty();
        }
    }

    @Test
    void aPromotedReplicaHasANewerTimelineAndTheWriterNoticesIt() throws Exception {
        Path standbyData = directory.resolve("standby");
        PostgresSinkConfig config;
        PostgresCommittable checkpoint1;
        try (TestPostgres primary = primaryWithCopy(directory.resolve("primary"), standbyData)) {
            TestPostgres standby = startStandby(standbyData, primary);
            try {
                // synchronous and applied: the replica misses nothing, only its timeline will tell
                primary.execute("ALTER SYSTEM SET synchronous_standby_names = '*'",
                        "ALTER SYSTEM SET synchronous_commit = 'remote_apply'", "SELECT pg_reload_conf()");
                awaitSyncState(primary, "sync");
                config = SinkDatabase.config(StaleCopyFailoverTest.builder(primary));
                try (PostgresExactlyOnceWriter writer = SinkDatabase.writer(config, 1, OptionalLong.empty())) {
                    checkpoint1 = checkpoint(writer, 1, "a");
                }
                primary.close(); // the primary is lost
                standby.execute("SELECT pg_promote()");
                Eventually.await("the standby is promoted", REPLICATION,
                        () -> standby.rows("SELECT pg_is_in_recovery()").equals(List.of("f")));

                PostgresSinkConfig onPromoted = StaleCopyFailoverTest.onServer(standby, config);
                PostgresSinkMetrics metrics = PostgresSinkMetrics.unregistered();
                try (PostgresExactlyOnceWriter writer = new PostgresExactlyOnceWriter(onPromoted,
                        new WriterStart(0, 1, 128, 2, "test-job-id", OptionalLong.of(1), List.of()), metrics)) {
                    commit(onPromoted, checkpoint1);
                    PostgresCommittable checkpoint2 = checkpoint(writer, 2, "b"); // its first barrier
                    assertThat(metrics.serverChangesSeen.getCount()).as("timeline 1 -> 2").isEqualTo(1);
                    commit(onPromoted, checkpoint2);
                }
                assertThat(SinkDatabase.deliveries(standby)).isEqualTo(Map.of("a", 1, "b", 1));
            } finally {
                standby.close();
            }
        }
    }

    private static Optional<String> warning(TestPostgres server, String user) throws Exception {
        try (Connection connection = DriverManager.getConnection(server.jdbcUrl(), user, "")) {
            return ServerChecks.replicationWarning(connection);
        }
    }
}
