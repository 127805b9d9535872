package io.onceflow.job;

import io.onceflow.api.EventProcessor;
import io.onceflow.job.Onceflow;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.testing.MiniClusters;
import io.onceflow.testing.PipelineScenario;
import io.onceflow.tools.audit.AuditReport;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Set;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.StateRecoveryOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;

import static org.assertj.core.api.Assertions.assertThat;


/**
 * Stop with a savepoint, then resume from it at another parallelism (2 -> 3 -> 1), re-sending
 * records from before each savepoint in between. The remembered ids must move with their key
 * groups: a re-sent id must still be dropped after rescaling, and nothing may be lost or doubled.
 */
class SavepointRescaleIT {
    private static final long RECORDS_PER_PHASE = 3_000;

    @RegisterExtension
    static final MiniClusterExtension FLINK = MiniClusters.fourSlots();

    @TempDir
    Path savepoints;

    @Test
    void resumesFromASavepointAtAnotherParallelismWithoutLossOrDuplicates() throws Exception {
        PipelineScenario scenario = new PipelineScenario("rescale").withPostgres().with("state.backend", "rocksdb");
        Set<String> expectedIds = new HashSet<>(scenario.produce(RECORDS_PER_PHASE, 1).uniqueIds());

        String savepoint = runUntilCaughtUpThenStop(scenario, 2, null, expectedIds.size());

        // the first phase again, byte for byte (duplicates across the savepoint), then new records
        scenario.produce(RECORDS_PER_PHASE, 1);
        expectedIds.addAll(scenario.produce(RECORDS_PER_PHASE, 2).uniqueIds());
        savepoint = runUntilCaughtUpThenStop(scenario, 3, savepoint, expectedIds.size());

        scenario.produce(RECORDS_PER_PHASE / 2, 2);
        expectedIds.addAll(scenario.produce(RECORDS_PER_PHASE, 3).uniqueIds());
        runUntilCaughtUpThenStop(scenario, 1, savepoint, expectedIds.size());

        AuditReport audit = scenario.audit();
        assertThat(audit.problems()).isEmpty();
        assertThat(audit.uniqueIds()).isEqualTo(expectedIds.size());
        assertThat(audit.outputRecords()).isEqualTo(expectedIds.size());
        assertThat(audit.duplicateRecords()).as("re-sent records were in the input").isGreaterThan(RECORDS_PER_PHASE);
    }

    /** Runs the unbounded job until the output holds {@code expectedOutput} records, then stops it with a savepoint. */
    private String runUntilCaughtUpThenStop(PipelineScenario scenario, int parallelism, String restoreFrom,
            int expectedOutput) throws Exception {
        OnceflowConfig config = scenario.with("parallelism", String.valueOf(parallelism)).config();
        Configuration flink = Onceflow.flinkConfiguration(config);
        if (restoreFrom != null) {
            flink.set(StateRecoveryOptions.SAVEPOINT_PATH, restoreFrom);
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(flink);
        Onceflow.job(config, EventProcessor.passThrough()).defineIn(env);
        JobClient job = env.executeAsync(scenario.name + "-p" + parallelism);

        scenario.awaitOutput(job, expectedOutput);
        return job.stopWithSavepoint(false, savepoints.toUri().toString(), SavepointFormatType.CANONICAL).get();
    }
}
