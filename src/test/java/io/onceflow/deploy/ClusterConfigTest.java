package io.onceflow.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.onceflow.job.Onceflow;
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
import org.apache.flink.util.FileUtils;
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
                CheckpointingOptions.CHECKPOINTING_CONSISTENCY_MODE, CheckpointingOptions.ENABLE_UNALIGNED,
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
     * High availability needs a service and shared storage config.yaml cannot name, so it is left to the
     * deployment, which appends one of the fragments ha-zookeeper.yaml or ha-kubernetes.yaml.
     */
    @Test
    void highAvailabilityIsNotSetInConfigYamlButInTheFragmentsItNames() throws Exception {
        String configYaml = Files.readString(Path.of("flink-conf", "config.yaml"));

        assertThat(ProjectFiles.clusterConfig().getOptional(HighAvailabilityOptions.HA_MODE)).isEmpty();
        assertThat(configYaml).contains("ha-zookeeper.yaml", "ha-kubernetes.yaml");
    }

    /**
     * The ZooKeeper fragment, appended to config.yaml, loads in Flink 2.2 (no key twice), sets only Flink's
     * own high-availability options, and everything a standalone cluster needs: the type, the quorum, the
     * cluster id, the storage, and the JobManagers' RPC port (with ZooKeeper HA Flink ignores
     * jobmanager.rpc.port and picks a random one without it).
     */
    @Test
    void theZooKeeperFragmentIsCompleteAndHoldsOnlyFlinksHighAvailabilityOptions(@TempDir Path directory)
            throws Exception {
        Configuration ha = appendedToConfigYaml("ha-zookeeper.yaml", directory);

        assertThat(fragmentKeys("ha-zookeeper.yaml")).allSatisfy(key -> assertThat(highAvailabilityKeys()).contains(key));
        assertThat(ha.get(HighAvailabilityOptions.HA_MODE)).isEqualTo("zookeeper");
        for (ConfigOption<?> needed : List.of(HighAvailabilityOptions.HA_ZOOKEEPER_QUORUM,
                HighAvailabilityOptions.HA_CLUSTER_ID, HighAvailabilityOptions.HA_STORAGE_PATH)) {
            assertThat(ha.getOptional(needed)).as(needed.key()).isPresent();
        }
        assertThat(ha.get(HighAvailabilityOptions.HA_JOB_MANAGER_PORT_RANGE)).as("a fixed port")
                .isEqualTo(String.valueOf(ha.get(JobManagerOptions.PORT)));
        assertThat(ha.get(HighAvailabilityOptions.ZOOKEEPER_SESSION_TIMEOUT))
                .as("a standby takes over after it; far below the 10min outage the start check requires")
                .isLessThan(OnceflowConfig.SHORTEST_OUTAGE_TO_SURVIVE.minus(ProjectFiles.clusterConfig()
                        .get(JobManagerOptions.SLOT_REQUEST_TIMEOUT)));
    }

    /**
     * The Kubernetes fragment, appended to config.yaml, loads in Flink 2.2, and sets the type, the storage
     * and kubernetes.cluster-id, never high-availability.cluster-id (derived from it). Its kubernetes.* keys
     * are flink-kubernetes's KubernetesConfigOptions, which is not on the test classpath: they are compared
     * with the names Flink 2.2 documents.
     */
    @Test
    void theKubernetesFragmentIsCompleteAndHoldsOnlyFlinksOptions(@TempDir Path directory) throws Exception {
        Configuration ha = appendedToConfigYaml("ha-kubernetes.yaml", directory);

        assertThat(ha.get(HighAvailabilityOptions.HA_MODE)).isEqualTo("kubernetes");
        assertThat(ha.getOptional(HighAvailabilityOptions.HA_STORAGE_PATH)).isPresent();
        assertThat(ha.getOptional(HighAvailabilityOptions.HA_CLUSTER_ID)).isEmpty();
        assertThat(ha.toMap()).containsKey("kubernetes.cluster-id");
        assertThat(fragmentKeys("ha-kubernetes.yaml")).allSatisfy(key -> assertThat(key.startsWith("kubernetes.")
                ? List.of("kubernetes.cluster-id", "kubernetes.namespace").contains(key)
                : highAvailabilityKeys().contains(key)).as(key).isTrue());
    }

    private static Set<String> highAvailabilityKeys() throws IllegalAccessException {
        Set<String> flinkKeys = new HashSet<>();
        for (Field field : HighAvailabilityOptions.class.getFields()) {
            if (field.get(null) instanceof ConfigOption<?> option) {
                flinkKeys.add(option.key());
            }
        }
        return flinkKeys;
    }

    /** The keys a fragment sets, as Flink reads them. */
    static Set<String> fragmentKeys(String fragment) throws IOException {
        Path alone = fragmentAlone(fragment);
        try {
            return GlobalConfiguration.loadConfiguration(alone.toString()).keySet();
        } finally {
            FileUtils.deleteDirectoryQuietly(alone.toFile());
        }
    }

    private static Path fragmentAlone(String fragment) throws IOException {
        Path directory = Files.createTempDirectory("onceflow-ha-fragment");
        Files.copy(Path.of("flink-conf", fragment), directory.resolve("config.yaml"));
        return directory;
    }

    /** config.yaml with {@code fragment} appended, as the fragment's first lines say to do, as Flink loads it. */
    private static Configuration appendedToConfigYaml(String fragment, Path directory) throws IOException {
        Files.writeString(directory.resolve("config.yaml"), Files.readString(Path.of("flink-conf", "config.yaml"))
                + "\n" + Files.readString(Path.of("flink-conf", fragment)));
        return GlobalConfiguration.loadConfiguration(directory.toString());
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
