package io.onceflow.chaos;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import org.apache.curator.test.TestingServer;
import org.apache.flink.configuration.GlobalConfiguration;
import org.apache.flink.util.FileUtils;

/**
 * ZooKeeper (in the test's JVM) standing in for a deployment's HA services, so that a new JobManager
 * recovers the running job after {@code kill -9} of the old one; or nothing, when a run kills no
 * JobManager (leader election only slows the cluster's start then).
 */
final class JobManagerHa implements AutoCloseable {
    private final TestingServer zooKeeper;
    private final Path storage;
    private final String clusterId;

    private JobManagerHa(TestingServer zooKeeper, Path storage, String clusterId) {
        this.zooKeeper = zooKeeper;
        this.storage = storage;
        this.clusterId = clusterId;
    }

    /**
     * Starts ZooKeeper if {@code needed}; {@code storage} holds the job graphs and checkpoint
     * pointers, and is deleted on {@link #close}.
     */
    static JobManagerHa startIf(boolean needed, Path storage, String clusterId) throws Exception {
        return new JobManagerHa(needed ? new TestingServer() : null, storage, clusterId);
    }

    /**
     * The Flink settings of this HA setup, the documented ones (flink-conf/ha-zookeeper.yaml) with this
     * test's quorum, storage and cluster id, and two test-only overrides; none without ZooKeeper.
     */
    Map<String, String> flinkSettings() {
        if (zooKeeper == null) {
            return Map.of();
        }
        Map<String, String> settings = new HashMap<>(
                GlobalConfiguration.loadConfiguration(documentedFragment().toString()).toMap());
        settings.put("high-availability.zookeeper.quorum", zooKeeper.getConnectString());
        settings.put("high-availability.storageDir", storage.toUri().toString());
        settings.put("high-availability.cluster-id", "/" + clusterId);
        // test only: several JobManagers of several tests on one host, on free ports
        settings.put("high-availability.jobmanager.port", "0");
        // test only: the killed JobManager's leadership ends with its ZooKeeper session, sooner than in production
        settings.put("high-availability.zookeeper.client.session-timeout", "8000");
        return settings;
    }

    /** A directory holding flink-conf/ha-zookeeper.yaml as its config.yaml, for Flink to read. */
    private static Path documentedFragment() {
        try {
            Path directory = Files.createTempDirectory("onceflow-ha-zookeeper");
            Files.copy(Path.of("flink-conf", "ha-zookeeper.yaml"), directory.resolve("config.yaml"));
            directory.toFile().deleteOnExit();
            directory.resolve("config.yaml").toFile().deleteOnExit();
            return directory;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Override
    public void close() throws Exception {
        try {
            if (zooKeeper != null) {
                zooKeeper.close();
            }
        } finally {
            FileUtils.deleteDirectoryQuietly(storage.toFile());
        }
    }
}
