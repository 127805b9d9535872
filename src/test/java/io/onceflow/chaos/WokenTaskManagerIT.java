package io.onceflow.chaos;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.onceflow.testing.Eventually;
import io.onceflow.testing.cluster.ClusterHarness;
import io.onceflow.testing.cluster.ContinuousProducer;
import io.onceflow.testing.cluster.FlinkRestClient;
import io.onceflow.testing.cluster.FlinkStandaloneCluster;
import io.onceflow.testing.cluster.InputDrain;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/**
 * A TaskManager frozen (SIGSTOP) past the heartbeat timeout while its Kafka writers have sends in
 * flight, and woken (SIGCONT) after the job recovered on the other TaskManager, must survive: its
 * stale tasks fail and are cleaned up, and it registers again as a spare. Before the sink wiring
 * contained it, the Kafka writer's {@code close()} rethrew the fenced producer's error during the
 * task's cleanup, Flink logged "FATAL - exception in exception handler" and the process exited
 * (issue #24, item 7). Three freezes in a row, then the audit counts every id.
 */
class WokenTaskManagerIT {
    private static final String NAME = "woken";
    private static final int FREEZES = Integer.getInteger("woken.freezes", 3);
    private static final Duration RECOVERY_TIMEOUT = Duration.ofMinutes(2);
    /** How long a woken TaskManager gets to fail its stale tasks, clean up and register again. */
    private static final Duration WAKE_TIMEOUT = Duration.ofSeconds(60);
    private static final String FATAL = "exception in exception handler";
    private static final int MAX_MESSAGE_BYTES = 4096;
    private static final int MAX_ID_LENGTH = 64;

    @Test
    void aWokenTaskManagerCleansUpItsStaleTasksAndStays() throws Exception {
        try (ClusterHarness cluster = ClusterHarness.start(2, 2)) {
            FlinkStandaloneCluster flink = cluster.flink();
            FlinkRestClient rest = flink.rest();
            Map<String, String> settings = cluster.kafkaJobSettings(NAME, 4, 1);
            settings.put("input.starting.offsets", "earliest");
            settings.put("checkpoint.interval", "1s");
            settings.put("parallelism", "2");
            // the producer's poison includes records over these limits
            settings.put("message.max.bytes", String.valueOf(MAX_MESSAGE_BYTES));
            settings.put("message.id.max.length", String.valueOf(MAX_ID_LENGTH));
            List<String> jobArgs = List.of("--config", cluster.writeJobProperties(NAME, settings).toString());
            String jobId = rest.runJar(rest.uploadJar(ClusterHarness.jobJar()), jobArgs, null);
            try (ContinuousProducer producer = new ContinuousProducer(cluster.kafka().bootstrapServers(),
                    settings.get("input.topics"), 0, 2_000, MAX_MESSAGE_BYTES, MAX_ID_LENGTH)) {
                producer.start();
                awaitRunningWithNewCheckpoint(rest, jobId, 0);
                List<String> woken = new ArrayList<>();
                for (int freeze = 1; freeze <= FREEZES; freeze++) {
                    FlinkStandaloneCluster.TaskManager sleeper = busyTaskManager(flink);
                    // the producer writes all the time: the sleeper's Kafka writers have sends in flight
                    sleeper.process().pause();
                    awaitLost(rest, sleeper, flink.heartbeatTimeout().plus(RECOVERY_TIMEOUT));
                    awaitRunningWithNewCheckpoint(rest, jobId, rest.checkpointCounts(jobId).path("completed").asLong());
                    sleeper.process().resume();
                    awaitIdleSpare(rest, sleeper);
                    woken.add(sleeper.resourceId());
                    assertThat(sleeper.process().isAlive()).as("%s alive after freeze %d", sleeper.resourceId(), freeze)
                            .isTrue();
                    assertThat(flink.logLinesContaining(FATAL)).as("'%s' in the logs after freeze %d", FATAL, freeze)
                            .isZero();
                }
                ContinuousProducer.GroundTruth truth = producer.stopAndAwait(Duration.ofMinutes(5).toMillis());
                InputDrain.await(cluster.kafka(), settings.get("input.topics"), settings.get("input.group.id"),
                        Duration.ofMinutes(2), Duration.ofMinutes(10));
                awaitRunningWithNewCheckpoint(rest, jobId, rest.checkpointCounts(jobId).path("completed").asLong());
                long fencedCloses = flink.logLinesContaining("closing a stale Kafka writer");
                ClusterHarness.AuditOutcome audit = cluster.audit(jobArgs, Duration.ofMinutes(5));
                JsonNode report = audit.report();
                System.out.printf("SUMMARY freezes=%d woken=%s fencedWriterCloses=%d events=%d uniqueIds=%d"
                        + " auditClean=%s%n", FREEZES, woken, fencedCloses, truth.records(), truth.uniqueIds(),
                        report.path("clean").asBoolean());
                assertThat(report.path("problems")).as("audit problems").isEmpty();
                assertThat(audit.exitCode()).as("audit exit code").isZero();
                assertThat(report.path("input").path("uniqueIds").asLong()).as("unique ids").isEqualTo(truth.uniqueIds());
                assertThat(report.path("output").path("records").asLong()).as("output records")
                        .isEqualTo(truth.uniqueIds());
                assertThat(report.path("deadLetters").path("records").asLong()).as("dead letters")
                        .isEqualTo(truth.poisonRecords());
                for (FlinkStandaloneCluster.TaskManager taskManager : flink.taskManagers()) {
                    assertThat(taskManager.process().isAlive()).as(taskManager.resourceId() + " alive at the end").isTrue();
                }
            }
        }
    }

    private static FlinkStandaloneCluster.TaskManager busyTaskManager(FlinkStandaloneCluster flink) throws IOException {
        List<String> busy = flink.rest().taskManagers().stream().filter(FlinkRestClient.TaskManagerSlots::runsTasks)
                .map(FlinkRestClient.TaskManagerSlots::id).toList();
        return flink.taskManagers().stream().filter(tm -> busy.contains(tm.resourceId())).findFirst()
                .orElseThrow(() -> new IllegalStateException("no TaskManager runs tasks"));
    }

    private static void awaitLost(FlinkRestClient rest, FlinkStandaloneCluster.TaskManager taskManager, Duration timeout)
            throws Exception {
        Eventually.await(taskManager.resourceId() + " declared lost within " + timeout, timeout, Duration.ofMillis(250),
                () -> registration(rest, taskManager).map(tm -> false).orElse(true));
    }

    /**
     * Waits until the woken TaskManager is registered again with none of its slots in use (its stale
     * tasks are gone); fails at once if its process ended.
     */
    private static void awaitIdleSpare(FlinkRestClient rest, FlinkStandaloneCluster.TaskManager taskManager)
            throws Exception {
        Eventually.await(taskManager.resourceId() + " registered again with free slots within " + WAKE_TIMEOUT,
                WAKE_TIMEOUT, Duration.ofMillis(250), () -> {
                    if (!taskManager.process().isAlive()) {
                        // the harness deletes the logs on close: the evidence goes into the message
                        Path log = taskManager.process().log().resolveSibling(taskManager.resourceId() + ".log");
                        assertThat(taskManager.process().isAlive()).as(taskManager.resourceId() + " alive after SIGCONT;"
                                + " its log from the first FATAL line:\n" + fromFirstFatalLine(log)).isTrue();
                    }
                    return registration(rest, taskManager).map(tm -> !tm.runsTasks()).orElse(false);
                });
    }

    private static String fromFirstFatalLine(Path log) throws IOException {
        List<String> lines = Files.readAllLines(log);
        int fatal = 0;
        while (fatal < lines.size() - 1 && !lines.get(fatal).contains("FATAL")) {
            fatal++;
        }
        return String.join("\n", lines.subList(fatal, Math.min(lines.size(), fatal + 120)));
    }

    private static Optional<FlinkRestClient.TaskManagerSlots> registration(FlinkRestClient rest,
            FlinkStandaloneCluster.TaskManager taskManager) {
        try {
            return rest.taskManagers().stream().filter(tm -> tm.id().equals(taskManager.resourceId())).findFirst();
        } catch (IOException jobManagerBusy) {
            return Optional.of(new FlinkRestClient.TaskManagerSlots(taskManager.resourceId(), 1, 0)); // ask again
        }
    }

    private static void awaitRunningWithNewCheckpoint(FlinkRestClient rest, String jobId, long checkpointsBefore)
            throws Exception {
        Eventually.await("running with a new checkpoint within " + RECOVERY_TIMEOUT, RECOVERY_TIMEOUT,
                Duration.ofMillis(250), () -> {
                    try {
                        return rest.isFullyRunning(jobId)
                                && rest.checkpointCounts(jobId).path("completed").asLong() > checkpointsBefore;
                    } catch (IOException jobManagerBusy) {
                        return false;
                    }
                });
    }
}
