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
import java.time.Duration;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.apache.flink.api.common.JobID;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfSystemProperty;

/**
 * A JobManager failover that ties the fencing tokens (issue #24, item 1): the first JobManager
 * restarts the job {@value #STORM_ATTEMPTS_DEFAULT} times or more ({@code -Djmtie.attempts}) from
 * the latest checkpoint without completing the next (a failure switch, {@link FailWhileFileExists}),
 * and dies by {@code kill -9} while the storm's last attempt runs and one TaskManager is frozen
 * (SIGSTOP); the switch is removed and a new JobManager restores the same checkpoint, where Flink
 * numbers the attempts from 0 again, below the numbers the first JobManager's writers recorded. The
 * frozen TaskManager wakes up (SIGCONT) once the new JobManager's job runs.
 *
 * <p>The new JobManager must complete a checkpoint within {@link #STALL_LIMIT} of its start, and
 * after the input is drained the audit must find every input id once in PostgreSQL and in the
 * output topic. Fencing by Flink's attempt numbers fails this: each of the new attempts 0..a is
 * refused as stale, each a restart with the project's backoff (flink-conf/: 5 s growing to 30 s).
 *
 * <p>Both JobManagers restart with the project's restart strategy: the new one recovers the job
 * graph, with the strategy, from the HA store, so a storm made fast with a short fixed delay makes
 * the stall after it as short (a first version's new JobManager, refused as stale all the same,
 * checkpointed after 60 s). The storm therefore takes about as long as the stall it causes, about 3
 * minutes, and the whole test about 10: it runs with {@code -Pchaos} (or {@code
 * -Dchaos.jobManagerTie=true}), not in the default {@code mvn verify}.
 */
@EnabledIfSystemProperty(named = "chaos.jobManagerTie", matches = "true")
class JobManagerTieIT {
    private static final int STORM_ATTEMPTS_DEFAULT = 7;
    private static final int STORM_ATTEMPTS = Integer.getInteger("jmtie.attempts", STORM_ATTEMPTS_DEFAULT);
    private static final Duration STALL_LIMIT = Duration.ofMinutes(2);
    /** How long the test watches a stalled job, to report how the stall ends (a failure or a late checkpoint). */
    private static final Duration OBSERVE_LIMIT = Duration.ofMinutes(5);
    private static final String PREFIX = "jmtie";
    private static final String STALE_REFUSAL = "is claimed by a newer attempt";
    /** What a writer logs when it ends an older attempt's session, and when its recovery rolls back. */
    private static final List<String> ACTS_ON_OTHERS = List.of("terminating the session of an older attempt",
            "abandoned prepared transactions");
    /** What a woken writer logs when it stops harmlessly: closed before any barrier, or refused at one. */
    private static final List<String> STOPS_HARMLESSLY = List.of("closed before its first checkpoint barrier",
            STALE_REFUSAL);

    @Test
    void aNewJobManagerCheckpointsWithinTwoMinutesAfterARestartStormWithEveryIdOnce() throws Exception {
        try (JobManagerHa ha = JobManagerHa.startIf(true, Files.createTempDirectory("onceflow-jmtie-ha"), PREFIX);
                ClusterHarness cluster = ClusterHarness.startServices()) {
            Path failureSwitch = cluster.directory().resolve("storm-switch");
            List<String> jobArgs = List.of("--config", writeJobProperties(cluster).toString());
            String jobId = JobID.generate().toHexString();
            Map<String, String> settings = new HashMap<>(ha.flinkSettings());
            settings.put("env.java.opts.taskmanager", FailWhileFileExists.jvmOption(failureSwitch));
            FlinkStandaloneCluster flink = cluster.startApplicationCluster(settings,
                    new FlinkStandaloneCluster.Application(OnceflowJob.class.getName(),
                            cluster.jobJarWith(FailWhileFileExists.class), jobId, jobArgs),
                    2, 2);
            try (ContinuousProducer producer = new ContinuousProducer(cluster.kafka().bootstrapServers(),
                    PREFIX + "-in", 0, 400, 4096, 64)) {
                producer.start();
                JobManagerFailoverIT.awaitResumed(flink, jobId, false);

                Files.createFile(failureSwitch);
                Storm storm = Eventually.awaitValue("a restart storm of " + STORM_ATTEMPTS + " attempts under the"
                        + " first JobManager within 6 minutes", Duration.ofMinutes(6), Duration.ofMillis(200),
                        () -> Optional.of(storm(flink, jobId)).filter(now -> now.attempt() >= STORM_ATTEMPTS));

                // kill -9 as the storm's last attempt starts, a TaskManager frozen around it
                FlinkStandaloneCluster.TaskManager frozen = busiestTaskManager(flink);
                frozen.process().pause();
                long frozenActedBefore = linesOf(flink, frozen, ACTS_ON_OTHERS);
                long frozenStoppedBefore = linesOf(flink, frozen, STOPS_HARMLESSLY);
                flink.killJobManager();
                Claims claimsAtKill = claims(cluster);
                long staleBeforeJm2 = flink.taskManagerLogLinesContaining(STALE_REFUSAL);
                Files.delete(failureSwitch);
                long jm2Start = System.nanoTime();
                flink.restartJobManager();
                Jm2Start jm2 = awaitFirstCheckpoint(flink, jobId, jm2Start, frozen);
                long staleUnderJm2 = flink.taskManagerLogLinesContaining(STALE_REFUSAL) - staleBeforeJm2;

                ContinuousProducer.GroundTruth truth = null;
                ClusterHarness.AuditOutcome audit = null;
                if (jm2.firstCheckpoint().isPresent()) {
                    truth = producer.stopAndAwait(Duration.ofMinutes(5).toMillis());
                    InputDrain.await(cluster.kafka(), PREFIX + "-in", PREFIX, Duration.ofMinutes(2),
                            Duration.ofMinutes(10));
                    audit = cluster.audit(jobArgs, Duration.ofMinutes(5));
                }
                // what the frozen TaskManager's writers did once woken: nothing to anybody else's index
                long frozenActed = linesOf(flink, frozen, ACTS_ON_OTHERS) - frozenActedBefore;
                long frozenStopped = linesOf(flink, frozen, STOPS_HARMLESSLY) - frozenStoppedBefore;
                System.out.printf("SUMMARY stormAttemptUnderJm1=%d restoredCheckpointUnderJm1=%d"
                                + " restoredCheckpointUnderJm2=%s jm2FirstCheckpointSeconds=%s jm2State=%s frozen=%s"
                                + " writersAtKill=%s staleRefusalsUnderJm2=%d staleRefusalsTotal=%d wokenWritersActed=%d"
                                + " wokenWritersStopped=%d %s audit=%s%n",
                        storm.attempt(), storm.restoredCheckpoint(), jm2.restoredCheckpoint(),
                        jm2.firstCheckpoint().map(d -> String.valueOf(d.toMillis() / 1000.0)).orElse("none"),
                        jm2.state(), frozen.resourceId(), claimsAtKill, staleUnderJm2, staleBeforeJm2 + staleUnderJm2,
                        frozenActed, frozenStopped, truth, audit == null ? "not run" : audit.report());

                assertThat(jm2.restoredCheckpoint()).as("the checkpoint the second JobManager restored: the one the"
                        + " first JobManager's storm restarted from (the tie this test is about)")
                        .isEqualTo(storm.restoredCheckpoint());
                assertThat(jm2.firstCheckpoint()).as("the second JobManager's first completed checkpoint (its job"
                        + " state: " + jm2.state() + ")").isPresent();
                assertThat(jm2.firstCheckpoint().get()).as("time from the second JobManager's start to its first"
                        + " completed checkpoint").isLessThanOrEqualTo(STALL_LIMIT);
                audit.assertEveryIdOnce(truth, 0);
                assertThat(frozenActed).as("sessions ended and transactions rolled back by the woken TaskManager's"
                        + " writers (they restored the checkpoint the new JobManager restored, and got no barrier of it)")
                        .isZero();
            }
        }
    }

    private static long linesOf(FlinkStandaloneCluster flink, FlinkStandaloneCluster.TaskManager taskManager,
            List<String> texts) {
        return texts.stream().mapToLong(text -> flink.logLinesContaining(taskManager, text)).sum();
    }

    /** Where the restart storm stands: Flink's lowest attempt number over the job's subtasks, and the checkpoint it restored. */
    private record Storm(int attempt, long restoredCheckpoint) {}

    private static Storm storm(FlinkStandaloneCluster flink, String jobId) throws IOException {
        long restored = flink.rest().checkpoints(jobId).path("latest").path("restored").path("id").asLong(-1);
        return new Storm(flink.rest().minAttemptNumber(jobId), restored);
    }

    private static Path writeJobProperties(ClusterHarness cluster) throws IOException {
        Map<String, String> job = JobManagerFailoverIT.jobSettings(cluster, PREFIX);
        job.put("processor.class", FailWhileFileExists.class.getName());
        return cluster.writeJobProperties(PREFIX, job);
    }

    /** The TaskManager holding most of the job's slots: the one whose freeze matters. */
    private static FlinkStandaloneCluster.TaskManager busiestTaskManager(FlinkStandaloneCluster flink)
            throws IOException {
        List<FlinkRestClient.TaskManagerSlots> slots = flink.rest().taskManagers();
        String busiest = slots.stream().max(Comparator.comparingInt(tm -> tm.slots() - tm.freeSlots()))
                .map(FlinkRestClient.TaskManagerSlots::id).orElseThrow();
        return flink.taskManagers().stream().filter(tm -> tm.resourceId().equals(busiest)).findFirst().orElseThrow();
    }

    /** What the second JobManager's job did: the checkpoint it restored, its first new one, its state. */
    private record Jm2Start(long restoredCheckpoint, Optional<Duration> firstCheckpoint, String state) {}

    /** What {@link #awaitFirstCheckpoint} polls for once the job has ended or its JobManager exited. */
    private static final Duration ENDED_WITHOUT_CHECKPOINT = Duration.ofNanos(-1);

    /**
     * Waits up to {@link #OBSERVE_LIMIT} for the second JobManager's first completed checkpoint, and
     * resumes {@code frozen} once its job runs (or when {@link #STALL_LIMIT} has passed without).
     */
    private static Jm2Start awaitFirstCheckpoint(FlinkStandaloneCluster flink, String jobId, long startNanos,
            FlinkStandaloneCluster.TaskManager frozen) throws Exception {
        long[] restored = {-1};
        String[] state = {"unknown"};
        boolean[] resumed = {false};
        Optional<Duration> first = Eventually.valueWithin(OBSERVE_LIMIT, Duration.ofMillis(250), () -> {
            Duration elapsed = Duration.ofNanos(System.nanoTime() - startNanos);
            try {
                state[0] = flink.rest().job(jobId).path("state").asText();
                JsonNode checkpoints = flink.rest().checkpoints(jobId);
                restored[0] = checkpoints.path("latest").path("restored").path("id").asLong(restored[0]);
                if (!resumed[0] && (flink.rest().isFullyRunning(jobId) || elapsed.compareTo(STALL_LIMIT) > 0)) {
                    frozen.process().resume();
                    resumed[0] = true;
                }
                if (checkpoints.path("counts").path("completed").asLong() > 0) {
                    return Optional.of(elapsed);
                }
            } catch (IOException notYet) {
                // the new JobManager has not recovered the job yet
            }
            if (List.of("FAILED", "CANCELED", "FINISHED").contains(state[0]) || !flink.jobManagerAlive()) {
                return Optional.of(ENDED_WITHOUT_CHECKPOINT);
            }
            return Optional.empty();
        });
        if (!resumed[0]) {
            frozen.process().resume();
        }
        return new Jm2Start(restored[0], first.filter(elapsed -> elapsed != ENDED_WITHOUT_CHECKPOINT), state[0]);
    }

    /** The writers' claims of the test's sink prefix (for the summary): the attempt numbers and restored checkpoints recorded. */
    private record Claims(int minAttempt, int maxAttempt, List<Long> restoredCheckpoints) {}

    private static Claims claims(ClusterHarness cluster) {
        String[] row = cluster.postgres().rows("SELECT min(attempt), max(attempt), string_agg(DISTINCT"
                + " coalesce(restored_checkpoint, 0)::text, ',') FROM onceflow_writers WHERE sink_prefix = '"
                + PREFIX + "'").get(0).split(" ");
        if (row.length < 3 || row[0].equals("null")) {
            return new Claims(-1, -1, List.of());
        }
        return new Claims(Integer.parseInt(row[0]), Integer.parseInt(row[1]),
                Arrays.stream(row[2].split(",")).map(Long::valueOf).toList());
    }
}
