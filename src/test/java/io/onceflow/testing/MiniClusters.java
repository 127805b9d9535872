package io.onceflow.testing;

import org.apache.flink.runtime.testutils.MiniClusterResourceConfiguration;
import org.apache.flink.test.junit5.MiniClusterExtension;

/** The Flink MiniCluster the pipeline ITs share the shape of: one TaskManager with 4 slots. */
public final class MiniClusters {
    private MiniClusters() {}

    /** Enough slots for a job at parallelism 3 plus a spare, as in the rescaling tests. */
    public static MiniClusterExtension fourSlots() {
        return new MiniClusterExtension(new MiniClusterResourceConfiguration.Builder()
                .setNumberTaskManagers(1)
                .setNumberSlotsPerTaskManager(4)
                .build());
    }
}
