package io.onceflow.job;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.testing.FailureInjector;
import io.onceflow.testing.MiniClusters;
import io.onceflow.testing.PipelineScenario;
import io.onceflow.testing.TestPostgres;
import io.onceflow.tools.generator.GeneratedInput;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Two jobs with different sink prefixes share one database and its commit log, and both fail and
 * recover while the other has prepared transactions outstanding. Recovery of one must never roll
 * back or commit the other's transactions: both end with every id exactly once.
 */
class TwoJobsOneDatabaseIT {
    private static final long RECORDS = 5_000;

    @RegisterExtension
    static final MiniClusterExtension FLINK = MiniClusters.fourSlots();

    @Test
    void jobsWithDifferentPrefixesDoNotDisturbEachOther() throws Exception {
        TestPostgres.TestDatabase database = TestPostgres.shared().newDatabase();
        PipelineScenario first = new PipelineScenario("two-jobs-a").withPostgres(database);
        PipelineScenario second = new PipelineScenario("two-jobs-b").withPostgres(database);
        GeneratedInput firstTruth = first.produce(RECORDS, 21);
        GeneratedInput secondTruth = second.produce(RECORDS, 22);

        JobClient firstJob = ExactlyOnceIT.boundedJob(first.config(), new FailureInjector(
                first.name, FailureInjector.Moment.AFTER_SNAPSHOT_BEFORE_COMPLETION, RECORDS / 3).pacedAt(500))
                .executeAsync(first.name);
        JobClient secondJob = ExactlyOnceIT.boundedJob(second.config(), new FailureInjector(
                second.name, FailureInjector.Moment.AFTER_COMPLETION, RECORDS / 2).pacedAt(500))
                .executeAsync(second.name);
        firstJob.getJobExecutionResult().get();
        secondJob.getJobExecutionResult().get();

        assertThat(FailureInjector.restartedAfterFiring(first.name)).isTrue();
        assertThat(FailureInjector.restartedAfterFiring(second.name)).isTrue();
        ExactlyOnceIT.assertExactlyOnce(first, firstTruth);
        ExactlyOnceIT.assertExactlyOnce(second, secondTruth);
    }
}
