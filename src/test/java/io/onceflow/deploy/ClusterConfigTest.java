package io.onceflow.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.onceflow.api.Onceflow;
import io.onceflow.config.OnceflowConfig;
import java.io.IOException;
import java.lang.reflect.Field;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.CoreOptions;
import org.apache.flink.configuration.GlobalConfiguration;
import org.apache.flink.configuration.HeartbeatManagerOptions;
import org.apache.flink.configuration.HighAvailabilityOptions;
import org.apache.flink.configuration.JobManagerOptions;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.configuration.WebOptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code flink-conf/config.yaml} as Flink 2.2 reads it, against what the job sets and what the comments promise. */
class ClusterConfigTest {
    @Test
    void theClustersCheckpointDefaultsAreTheJobsDefaults() {
        OnceflowConfig defaults = OnceflowConfig.fromMap(Map.of(
                "kafka.bootstrap.servers", "kafka:9092", "input.topics", "in", "input.group.id", "g",
                "output.topic", "out", "dead.letter.topic", "dlq", "kafka.transactional.id.prefix", "p"), Map.of());
        Configuration job = Onceflow.flinkConfiguration(defaults);
        Configuration cluster = ProjectFiles.clusterConfig();

        for (ConfigOption<?> option : List.of(CheckpointingOptions.CHECKPOINTING_INTERVAL,
                CheckpointingOptions.CHECKPOINTING_TIMEOUT, CheckpointingOptions.MIN_PAUSE_BETWEEN_CHECKPOINTS,
                CheckpointingOptions.CHECKPOINTING_CONSISTENCY_MODE,
                CheckpointingOptions.EXTERNALIZED_CHECKPOINT_RETENTION, StateBackendOptions.STATE_BACKEND,
                CheckpointingOptions.INCREMENTAL_CHECKPOINTS)) {
            assertThat(cluster.getOptional(option)).as(option.key() + " in config.yaml").isPresent();
            assertThat(cluster.get(option)).as(option.key() + ": config.yaml and the job's default").isEqualTo(job.get(option));
        }
    }

    /**
     * Flink's REST API has no authentication, and POST /jobs runs any job graph sent to it whatever
     * web.submit.enable says: by default it answers only on the loopback interface, and the web UI's jar
     * upload is off too.
     */
    @Test
    void theRestApiListensOnTheLoopbackInterfaceAndTheJarUploadIsOff() {
        Configuration cluster = ProjectFiles.clusterConfig();

        assertThat(cluster.get(RestOptions.BIND_ADDRESS)).as(RestOptions.BIND_ADDRESS.key()).isIn("localhost", "127.0.0.1");
        assertThat(cluster.getOptional(WebOptions.SUBMIT_ENABLE)).as(WebOptions.SUBMIT_ENABLE.key()).contains(false);
    }

    /**
     * High availability needs a service and shared storage this file cannot name, so it is left to the
     * deployment: the commented-out keys that say how must be Flink's own.
     */
    @Test
    void theCommentedHighAvailabilityKeysAreFlinksOwn() throws Exception {
        Set<String> flinkKeys = new HashSet<>();
        for (Field field : HighAvailabilityOptions.class.getFields()) {
            if (field.get(null) instanceof ConfigOption<?> option) {
                flinkKeys.add(option.key());
            }
        }
        List<String> commented = Files.readAllLines(Path.of("flink-conf", "config.yaml")).stream()
                .map(line -> line.replaceFirst("^#\\s+", ""))
                .filter(line -> line.startsWith("high-availability.")).map(line -> line.substring(0, line.indexOf(':')))
                .toList();

        assertThat(ProjectFiles.clusterConfig().getOptional(HighAvailabilityOptions.HA_MODE)).isEmpty();
        assertThat(commented).as("the commented high-availability keys in config.yaml").contains(
                HighAvailabilityOptions.HA_MODE.key(), HighAvailabilityOptions.HA_STORAGE_PATH.key())
                .allSatisfy(key -> assertThat(flinkKeys).contains(key));
    }

    @Test
    void flinkRefusesAKeyThatAppearsTwice(@TempDir Path directory) throws IOException {
        Files.writeString(directory.resolve("config.yaml"), "parallelism.default: 1\nparallelism.default: 2\n");

        assertThatThrownBy(() -> GlobalConfiguration.loadConfiguration(directory.toString()))
                .hasStackTraceContaining("parallelism.default");
    }

    @Test
    void theJava17OptionsIncludeTheExportsFlinkShipsForTableAndSql() {
        String options = ProjectFiles.clusterConfig().get(CoreOptions.FLINK_JVM_OPTIONS);

        for (String javac : List.of("api", "file", "parser", "tree", "util")) {
            assertThat(options).contains("--add-exports=jdk.compiler/com.sun.tools.javac." + javac + "=ALL-UNNAMED");
        }
        assertThat(options).contains("--add-opens=java.base/java.util=ALL-UNNAMED");
        assertThat(List.of(options.trim().split("\\s+")))
                .as("the cluster's options and the test JVMs' (pom.xml, flink.jvm.opens)")
                .containsExactlyInAnyOrder(ProjectFiles.pomProperties().get("flink.jvm.opens").split("\\s+"));
    }

    /**
     * A killed TaskManager must be declared lost before the first restart redeploys, or the restart
     * deploys to it, fails, and restarts again (TaskManagerLossIT measures the result).
     */
    @Test
    void aDeadTaskManagerIsNoticedBeforeTheFirstRestart() {
        Configuration cluster = ProjectFiles.clusterConfig();
        Duration noticed = cluster.get(HeartbeatManagerOptions.HEARTBEAT_INTERVAL)
                .multipliedBy(cluster.get(HeartbeatManagerOptions.HEARTBEAT_RPC_FAILURE_THRESHOLD));
        Duration firstRestart = cluster.get(RestartStrategyOptions.RESTART_STRATEGY_EXPONENTIAL_DELAY_INITIAL_BACKOFF);
        double jitter = cluster.get(RestartStrategyOptions.RESTART_STRATEGY_EXPONENTIAL_DELAY_JITTER_FACTOR);

        assertThat(cluster.get(RestartStrategyOptions.RESTART_STRATEGY)).isEqualTo("exponential-delay");
        assertThat(noticed.toMillis()).isLessThan((long) (firstRestart.toMillis() * (1 - jitter)));
    }

    /**
     * The job's restart.budget, which kafka.transaction.timeout must outlive on top of the checkpoints,
     * covers the longest restart this cluster makes: a silent TaskManager noticed after heartbeat.timeout,
     * the restart strategy's longest delay with its jitter, and the wait for slots.
     */
    @Test
    void theJobsRestartBudgetCoversTheClustersLongestRestart() {
        Configuration cluster = ProjectFiles.clusterConfig();
        Duration noticed = cluster.get(HeartbeatManagerOptions.HEARTBEAT_TIMEOUT);
        Duration longestDelay = cluster.get(RestartStrategyOptions.RESTART_STRATEGY_EXPONENTIAL_DELAY_MAX_BACKOFF);
        double jitter = cluster.get(RestartStrategyOptions.RESTART_STRATEGY_EXPONENTIAL_DELAY_JITTER_FACTOR);
        Duration slots = cluster.get(JobManagerOptions.SLOT_REQUEST_TIMEOUT);
        OnceflowConfig defaults = OnceflowConfig.fromMap(Map.of(
                "kafka.bootstrap.servers", "kafka:9092", "input.topics", "in", "input.group.id", "g",
                "output.topic", "out", "dead.letter.topic", "dlq", "kafka.transactional.id.prefix", "p"), Map.of());

        assertThat(cluster.get(RestartStrategyOptions.RESTART_STRATEGY)).isEqualTo("exponential-delay");
        assertThat(defaults.restartBudget())
                .isGreaterThan(noticed.plusMillis((long) (longestDelay.toMillis() * (1 + jitter))).plus(slots));
    }
}
