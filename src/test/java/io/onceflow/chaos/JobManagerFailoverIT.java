package io.onceflow.chaos;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.onceflow.job.OnceflowJob;
import io.onceflow.testing.Eventually;
import io.onceflow.testing.cluster.ClusterHarness;
import io.onceflow.testing.cluster.ContinuousProducer;
import io.onceflow.testing.cluster.FlinkRestClient;
import io.onceflow.testing.cluster.FlinkStandaloneCluster;
import io.onceflow.testing.cluster.InputDrain;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.apache.flink.api.common.JobID;
import org.junit.jupiter.api.Test;

/**
 * A JobManager failover in application mode with high availability, as the Kubernetes operator runs
 * the job: {@code kill -9} of the JobManager while the job writes, and a new JobManager in its place
 * (as Kubernetes restarts the pod). The new JobManager recovers the job from the HA store and runs
 * the job's {@code main} again, which must continue the job (not refuse its pending transactions and
 * live writers as a fresh start's, not register a new run of the PostgreSQL sink that stops the
 * recovered writers). The job must resume by itself from its latest checkpoint, each time, and in the
 * end the audit finds every input id exactly once in PostgreSQL and in the output topic.
 *
 * <p>ZooKeeper (in this JVM) stands in for Kubernetes' HA services: the dispatcher's recovery, the
 * fixed job id and the second run of {@code main} are the same with either.
 */
class JobManagerFailoverIT {
    private static final int FAILOVERS = Integer.getInteger("jmfailover.count", 2);
    static final Duration RECOVERY_TIMEOUT = Duration.ofMinutes(3);
    private static final String PREFIX = "jmfail";

    @Test
    void theJobResumesAfterEachJobManagerFailoverWithEveryIdOnce() throws Exception {
        try (JobManagerHa ha = JobManagerHa.startIf(true, Files.createTempDirectory("onceflow-jmfail-ha"), PREFIX);
                ClusterHarness cluster = ClusterHarness.startServices()) {
            List<String> jobArgs = List.of("--config", writeJobProperties(cluster).toString());
            String jobId = JobID.generate().toHexString();
            FlinkStandaloneCluster flink = cluster.startApplicationCluster(ha.flinkSettings(),
                    new FlinkStandaloneCluster.Application(OnceflowJob.class.getName(), ClusterHarness.jobJar(), jobId,
                            jobArgs),
                    2, 2);
            FlinkRestClient rest = flink.rest();
            try (ContinuousProducer producer = new ContinuousProducer(cluster.kafka().bootstrapServers(),
                    PREFIX + "-in", 0, 400, 4096, 64)) {
                producer.start();
                awaitResumed(flink, jobId, false);
                List<Long> restoredCheckpoints = new ArrayList<>();
                for (int failover = 0; failover < FAILOVERS; failover++) {
                    Thread.sleep(3_000);
                    flink.killJobManager();
                    flink.restartJobManager();
                    restoredCheckpoints.add(awaitResumed(flink, jobId, true));
                }
                ContinuousProducer.GroundTruth truth = producer.stopAndAwait(Duration.ofMinutes(5).toMillis());
                InputDrain.await(cluster.kafka(), PREFIX + "-in", PREFIX, Duration.ofMinutes(2), Duration.ofMinutes(10));
                ClusterHarness.AuditOutcome audit = cluster.audit(jobArgs, Duration.ofMinutes(5));
                JsonNode report = audit.report();
                long runs = runsOfThePrefix(cluster);
                long continuations = flink.logLinesContaining("started before (a JobManager failover runs main again)");
                System.out.printf("SUMMARY jobManagerFailovers=%d restoredCheckpoints=%s runs=%d continuedByMain=%d %s"
                        + " audit=%s%n", FAILOVERS, restoredCheckpoints, runs, continuations, truth, report);

                audit.assertEveryIdOnce(truth, 0);
                assertThat(runs).as("runs of the sink prefix: each JobManager's main continued the first").isOne();
                assertThat(continuations).as("JobManagers whose main continued the job").isEqualTo(FAILOVERS);
            }
        }
    }

    private static Path writeJobProperties(ClusterHarness cluster) throws IOException {
        return cluster.writeJobProperties(PREFIX, jobSettings(cluster, PREFIX));
    }

    /**
     * The job's settings, named after {@code prefix}: 4 input partitions, parallelism 2, a checkpoint
     * a second, and the limits of {@link ContinuousProducer}'s records as the tests make it.
     */
    static Map<String, String> jobSettings(ClusterHarness cluster, String prefix) {
        Map<String, String> job = cluster.jobSettings(prefix, 4);
        job.put("checkpoint.interval", "1s");
        job.put("parallelism", "2");
        job.put("message.max.bytes", "4096");
        job.put("message.id.max.length", "64");
        return job;
    }

    /**
     * Waits until the job runs with every task and has completed two checkpoints under the current
     * JobManager; after a failover also that it restored a checkpoint (resumed, not started afresh).
     *
     * @return the id of the restored checkpoint, 0 if none
     */
    static long awaitResumed(FlinkStandaloneCluster flink, String jobId, boolean restored) throws Exception {
        Optional<Long> restoredId = Eventually.valueWithin(RECOVERY_TIMEOUT, Duration.ofMillis(500), () -> {
            try {
                JsonNode checkpoints = flink.rest().checkpoints(jobId);
                long id = checkpoints.path("latest").path("restored").path("id").asLong(0);
                if (flink.rest().isFullyRunning(jobId) && checkpoints.path("counts").path("completed").asLong() >= 2
                        && (!restored || id > 0)) {
                    return Optional.of(id);
                }
            } catch (IOException notYet) {
                // the new JobManager is not up, or has not recovered the job yet
            }
            if (!flink.jobManagerAlive()) {
                throw doesNotRunAgain(flink, jobId);
            }
            return Optional.empty();
        });
        return restoredId.orElseThrow(() -> doesNotRunAgain(flink, jobId));
    }

    private static AssertionError doesNotRunAgain(FlinkStandaloneCluster flink, String jobId) {
        return new AssertionError("job " + jobId + " does not run again, with new checkpoints, within "
                + RECOVERY_TIMEOUT + (flink.jobManagerAlive() ? "" : ": the JobManager exited")
                + "; the end of its log:\n" + FlinkStandaloneCluster.tail(flink.jobManagerLog(), 80));
    }

    private static long runsOfThePrefix(ClusterHarness cluster) throws Exception {
        try (Connection connection = cluster.postgres().connect();
                Statement statement = connection.createStatement();
                ResultSet count = statement.executeQuery(
                        "SELECT count(*) FROM onceflow_runs WHERE sink_prefix = '" + PREFIX + "'")) {
            count.next();
            return count.getLong(1);
        }
    }
}
