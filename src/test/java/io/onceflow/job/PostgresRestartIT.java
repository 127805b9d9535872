package io.onceflow.job;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.onceflow.testing.ActionAfterEvents;
import io.onceflow.testing.MiniClusters;
import io.onceflow.testing.PipelineScenario;
import io.onceflow.testing.TestPostgres;
import io.onceflow.tools.generator.GeneratedInput;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * PostgreSQL stops and starts again on the same data directory while the job writes to it: open
 * connections drop, prepared transactions survive the restart, the job fails and recovers from its
 * last checkpoint. Every id must still arrive exactly once in the table and in the output topic.
 */
class PostgresRestartIT {
    private static final long RECORDS = 6_000;

    @RegisterExtension
    static final MiniClusterExtension FLINK = MiniClusters.fourSlots();

    @Test
    void everyIdExactlyOnceAcrossADatabaseRestart() throws Exception {
        assumeTrue(TestPostgres.shared().canRestart(), "needs the embedded PostgreSQL server to restart it");
        PipelineScenario scenario = new PipelineScenario("pg-restart").withPostgres();
        GeneratedInput truth = scenario.produce(RECORDS, 11);

        ActionAfterEvents restartDatabase =
                new ActionAfterEvents(scenario.name, RECORDS / 3, 500, () -> TestPostgres.shared().restart());
        ExactlyOnceIT.boundedJob(scenario.config(), restartDatabase).execute(scenario.name);

        assertThat(ActionAfterEvents.started(scenario.name)).as("the database was restarted mid-run").isTrue();
        ExactlyOnceIT.assertExactlyOnce(scenario, truth);
    }
}
