package io.onceflow.chaos;

import java.nio.file.Path;
import java.util.Map;
import org.apache.curator.test.TestingServer;
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

    /** The Flink settings of this HA setup; none without ZooKeeper. */
    Map<String, String> flinkSettings() {
        if (zooKeeper == null) {
            return Map.of();
        }
        return Map.of(
                "high-availability.type", "zookeeper",
                "high-availability.zookeeper.quorum", zooKeeper.getConnectString(),
                "high-availability.storageDir", storage.toUri().toString(),
                "high-availability.cluster-id", "/" + clusterId,
                // the killed JobManager's leadership ends with its ZooKeeper session
                "high-availability.zookeeper.client.session-timeout", "8000");
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
