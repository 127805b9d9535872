package io.onceflow.testing;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.MemorySize;
import org.apache.flink.configuration.TaskManagerOptions;
import org.apache.flink.runtime.testutils.MiniClusterResourceConfiguration;
import org.apache.flink.test.junit5.MiniClusterExtension;

/** The Flink MiniCluster the pipeline ITs share the shape of: one TaskManager with 4 slots. */
public final class MiniClusters {
    private MiniClusters() {}

    /**
     * Network buffers of 4 KB instead of 32 KB. An aligned checkpoint barrier queues behind the
     * records in flight between the source and the dedup; with 32 KB buffers that was about 900
     * events per subtask, so a paced test input of a few thousand records had room for only two or
     * three checkpoints whatever checkpoint.interval said, and a failure "between a snapshot and its
     * completion, after an earlier completion" could miss its moment (a CI flake). With 4 KB the
     * barrier waits behind about a hundred events and the checkpoints follow the interval.
     */
    private static final MemorySize NETWORK_BUFFER_SIZE = MemorySize.parse("4kb");

    /** Enough slots for a job at parallelism 3 plus a spare, as in the rescaling tests. */
    public static MiniClusterExtension fourSlots() {
        return new MiniClusterExtension(new MiniClusterResourceConfiguration.Builder()
                .setConfiguration(configuration())
                .setNumberTaskManagers(1)
                .setNumberSlotsPerTaskManager(4)
                .build());
    }

    /**
     * The MiniCluster settings above, for a local environment that starts its own MiniCluster
     * ({@code io.onceflow.testkit}, whose users have no flink-test-utils).
     */
    public static Configuration configuration() {
        Configuration configuration = new Configuration();
        configuration.set(TaskManagerOptions.MEMORY_SEGMENT_SIZE, NETWORK_BUFFER_SIZE);
        return configuration;
    }
}
