package io.onceflow.chaos;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.testing.Eventually;
import io.onceflow.testing.cluster.ClusterHarness;
import io.onceflow.testing.cluster.ContinuousProducer;
import io.onceflow.testing.cluster.FlinkRestClient;
import io.onceflow.testing.cluster.FlinkStandaloneCluster;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * What one routine TaskManager loss costs on a real cluster with the project's {@code flink-conf/}:
 * {@code kill -9} of a TaskManager that runs tasks, a fresh one started in its place (as Kubernetes
 * or Docker would), and the job's restarts counted until it runs again and has been quiet for a
 * while. Flink must not keep redeploying to the dead TaskManager: one loss is at most two restarts,
 * so that an alert on restarts means trouble. Also counts the sink committers' metric-name
 * collision warnings in the TaskManagers' logs, which the log configuration drops.
 */
class TaskManagerLossIT {
    private static final int LOSSES = Integer.getInteger("tmloss.kills", 3);
    private static final int MOST_RESTARTS_PER_LOSS = 2;
    /** Restarts that come later than this after the job runs again are not counted as part of the loss. */
    private static final Duration QUIET_PERIOD = Duration.ofSeconds(15);
    private static final Duration RECOVERY_TIMEOUT = Duration.ofMinutes(3);

    @Test
    void oneTaskManagerLossIsAtMostTwoRestarts() throws Exception {
        try (ClusterHarness cluster = ClusterHarness.start(2, 2)) {
            FlinkRestClient rest = cluster.flink().rest();
            Path jobProperties = writeJobProperties(cluster);
            String jobId = rest.runJar(rest.uploadJar(ClusterHarness.jobJar()),
                    List.of("--config", jobProperties.toString()), null);
            try (ContinuousProducer producer = new ContinuousProducer(cluster.kafka().bootstrapServers(),
                    "loss-in", 0, 200, 4096, 64)) {
                producer.start();
                awaitRunningWithNewCheckpoint(rest, jobId, 0);
                awaitQuiet(rest, jobId);
                long collisions = 0;
                List<Long> restartsPerLoss = new ArrayList<>();
                List<Long> secondsToRecover = new ArrayList<>();
                for (int loss = 0; loss < LOSSES; loss++) {
                    long restartsBefore = rest.jobMetric(jobId, "numRestarts");
                    long checkpointsBefore = rest.checkpointCounts(jobId).path("completed").asLong();
                    FlinkStandaloneCluster.TaskManager victim = busyTaskManager(cluster);
                    collisions += countCollisions(victim.directory());
                    long killed = System.nanoTime();
                    cluster.flink().kill(victim);
                    cluster.flink().startTaskManager();
                    awaitRunningWithNewCheckpoint(rest, jobId, checkpointsBefore);
                    secondsToRecover.add(Duration.ofNanos(System.nanoTime() - killed).toSeconds());
                    awaitQuiet(rest, jobId);
                    restartsPerLoss.add(rest.jobMetric(jobId, "numRestarts") - restartsBefore);
                }
                for (FlinkStandaloneCluster.TaskManager survivor : cluster.flink().taskManagers()) {
                    collisions += countCollisions(survivor.directory());
                }
                System.out.printf("SUMMARY taskManagerLosses=%d restartsPerLoss=%s secondsToRunningWithCheckpoint=%s"
                        + " pendingCommittablesCollisionWarnings=%d%n", LOSSES, restartsPerLoss, secondsToRecover,
                        collisions);
                assertThat(restartsPerLoss).as("job restarts per TaskManager loss").allMatch(
                        restarts -> restarts >= 1 && restarts <= MOST_RESTARTS_PER_LOSS);
                assertThat(collisions).as("'Name collision ... pendingCommittables' warnings in the TaskManager logs")
                        .isZero();
            }
        }
    }

    private static Path writeJobProperties(ClusterHarness cluster) throws IOException {
        Map<String, String> job = cluster.jobSettings("loss", 4);
        job.put("checkpoint.interval", "2s");
        job.put("parallelism", "2");
        return cluster.writeJobProperties("loss", job);
    }

    private static FlinkStandaloneCluster.TaskManager busyTaskManager(ClusterHarness cluster) throws IOException {
        List<String> busy = cluster.flink().rest().taskManagers().stream()
                .filter(FlinkRestClient.TaskManagerSlots::runsTasks).map(FlinkRestClient.TaskManagerSlots::id).toList();
        return cluster.flink().taskManagers().stream().filter(tm -> busy.contains(tm.resourceId())).findFirst()
                .orElseThrow(() -> new IllegalStateException("no TaskManager runs tasks"));
    }

    private static long countCollisions(Path taskManagerDirectory) throws IOException {
        try (Stream<Path> files = Files.list(taskManagerDirectory)) {
            long count = 0;
            for (Path log : files.filter(f -> f.getFileName().toString().endsWith(".log")).toList()) {
                try (Stream<String> lines = Files.lines(log)) {
                    count += lines.filter(line -> line.contains("Name collision") && line.contains("pendingCommittables"))
                            .count();
                }
            }
            return count;
        }
    }

    private static void awaitRunningWithNewCheckpoint(FlinkRestClient rest, String jobId, long checkpointsBefore)
            throws Exception {
        Eventually.await("running again within " + RECOVERY_TIMEOUT, RECOVERY_TIMEOUT, Duration.ofMillis(250), () -> {
            try {
                return rest.isFullyRunning(jobId)
                        && rest.checkpointCounts(jobId).path("completed").asLong() > checkpointsBefore;
            } catch (IOException jobManagerBusy) {
                return false; // ask again
            }
        });
    }

    /** Waits until the restart count has not changed for {@link #QUIET_PERIOD} while the job runs. */
    private static void awaitQuiet(FlinkRestClient rest, String jobId) throws Exception {
        long restarts = rest.jobMetric(jobId, "numRestarts");
        long quietSince = System.nanoTime();
        while (System.nanoTime() - quietSince < QUIET_PERIOD.toNanos()) {
            Thread.sleep(500);
            long now = rest.jobMetric(jobId, "numRestarts");
            if (now != restarts || !rest.isFullyRunning(jobId)) {
                restarts = now;
                quietSince = System.nanoTime();
            }
        }
    }
}
