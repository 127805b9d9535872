package io.onceflow.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.onceflow.testing.Eventually;
import io.onceflow.testing.cluster.ClusterHarness;
import io.onceflow.testing.cluster.FlinkStandaloneCluster;
import io.onceflow.testing.cluster.ServiceClasspath;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.apache.flink.configuration.CoreOptions;
import org.apache.flink.configuration.GlobalConfiguration;
import org.junit.jupiter.api.Test;

/**
 * {@code docker/submit-job.sh}, the compose stack's one-shot submitter, run as Docker would run it but
 * against the real multi-process cluster of the test harness, with Flink's own CLI ({@code flink list},
 * {@code flink run}) started from the Maven-resolved jars: it starts the job once, does nothing while
 * the job runs, resumes from the newest retained checkpoint after a cancel, and says what to do when
 * the job jar is missing. Also: a job whose checks fail when submitted over REST leaves the JobManager
 * running and returns the problem as the request's error.
 */
class SubmitScriptIT {
    private static final Path SCRIPT = Path.of("docker", "submit-job.sh").toAbsolutePath();
    private static final Duration TIMEOUT = Duration.ofMinutes(2);
    private static final Duration POLL_INTERVAL = Duration.ofMillis(300);

    private final HttpClient http = HttpClient.newHttpClient();
    private final ObjectMapper json = new ObjectMapper();
    private String restBase;

    @Test
    void submitsOnceDoesNothingWhileRunningAndResumesFromTheNewestCheckpoint() throws Exception {
        try (ClusterHarness cluster = ClusterHarness.start(2, 2)) {
            FlinkStandaloneCluster flink = cluster.flink();
            restBase = "http://127.0.0.1:" + GlobalConfiguration.loadConfiguration(
                    flink.configurationDirectory().toString()).getString("rest.port", "");
            Map<String, String> job = cluster.kafkaJobSettings("submit", 2, 1); // Kafka only: no PostgreSQL sink
            job.put("checkpoint.interval", "1s");
            List<String> jobArgs = ClusterHarness.asArguments(job);
            Path flinkCli = writeFlinkCli(cluster);
            Path emptyDirectory = Files.createDirectories(cluster.directory().resolve("no-jar"));
            Path jarDirectory = ClusterHarness.jobJar().toAbsolutePath().getParent();

            Outcome noJar = runScript(flinkCli, emptyDirectory, flink, jobArgs);
            assertThat(noJar.exitCode()).isEqualTo(2);
            assertThat(noJar.output()).contains("no onceflow-*-job.jar", "mvn package -DskipTests");

            Outcome first = runScript(flinkCli, jarDirectory, flink, jobArgs);
            assertThat(first.exitCode()).as(first.output()).isZero();
            assertThat(first.output()).contains("starting 'onceflow submit-in -> submit-out' without state");
            String jobId = awaitSingleRunningJob();

            Outcome again = runScript(flinkCli, jarDirectory, flink, jobArgs);
            assertThat(again.exitCode()).as(again.output()).isZero();
            assertThat(again.output()).contains("is already running");
            assertThat(awaitSingleRunningJob()).isEqualTo(jobId);

            awaitCompletedCheckpoints(jobId, 2);
            send(HttpRequest.newBuilder(URI.create(restBase + "/jobs/" + jobId + "?mode=cancel"))
                    .method("PATCH", HttpRequest.BodyPublishers.noBody()));
            awaitState(jobId, "CANCELED");

            Outcome resumed = runScript(flinkCli, jarDirectory, flink, jobArgs);
            assertThat(resumed.exitCode()).as(resumed.output()).isZero();
            assertThat(resumed.output()).containsPattern("resuming 'onceflow submit-in -> submit-out' from \\S+/"
                    + jobId + "/chk-\\d+");
            String resumedId = awaitSingleRunningJob();
            assertThat(resumedId).isNotEqualTo(jobId);
            String restoredFrom = awaitRestoredCheckpoint(resumedId);
            assertThat(resumed.output()).contains(restoredFrom.replaceFirst("^file:", ""));

            // over REST main runs inside the JobManager: a failed check is the request's error, not its exit
            String nobodyListens = "127.0.0.1:" + ServiceClasspath.freePort();
            job.put("kafka.bootstrap.servers", nobodyListens);
            List<String> unreachable = ClusterHarness.asArguments(job);
            String jarId = flink.rest().uploadJar(ClusterHarness.jobJar());
            assertThatThrownBy(() -> flink.rest().runJar(jarId, unreachable, null))
                    .hasMessageContaining("kafka.bootstrap.servers: no Kafka broker answered at " + nobodyListens);
            assertThat(flink.rest().taskManagers()).as("the JobManager still answers").hasSize(2);
            assertThat(awaitSingleRunningJob()).isEqualTo(resumedId);
        }
    }

    private record Outcome(int exitCode, String output) {}

    /** Flink's {@code bin/flink}, as a script over the harness's Flink jars and configuration. */
    private static Path writeFlinkCli(ClusterHarness cluster) throws IOException {
        Path conf = cluster.flink().configurationDirectory();
        String javaOptions = GlobalConfiguration.loadConfiguration(conf.toString()).get(CoreOptions.FLINK_JVM_OPTIONS);
        Path cli = cluster.directory().resolve("bin-flink");
        Files.writeString(cli, "#!/bin/sh\nexec '" + Path.of(System.getProperty("java.home"), "bin", "java") + "' "
                + javaOptions.replace('\n', ' ')
                + " -Dlog.file='" + cluster.directory().resolve("flink-cli.log") + "'"
                + " -Dlog4j.configurationFile='" + conf.resolve("log4j-cli.properties").toUri() + "'"
                + " -cp '" + ServiceClasspath.flink() + "' org.apache.flink.client.cli.CliFrontend \"$@\"\n");
        Files.setPosixFilePermissions(cli, PosixFilePermissions.fromString("rwxr-xr-x"));
        return cli;
    }

    private Outcome runScript(Path flinkCli, Path jarDirectory, FlinkStandaloneCluster flink, List<String> jobArgs)
            throws Exception {
        List<String> command = new ArrayList<>(List.of("sh", SCRIPT.toString()));
        command.addAll(jobArgs);
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
        Map<String, String> environment = builder.environment();
        environment.put("FLINK", flinkCli.toString());
        environment.put("FLINK_CONF_DIR", flink.configurationDirectory().toString());
        environment.put("JOBMANAGER", restBase.replace("http://", ""));
        environment.put("JOB_JAR_DIR", jarDirectory.toString());
        environment.put("STATE_DIR", flink.stateDirectory().toString());
        environment.put("JOB_NAME", "onceflow submit-in -> submit-out");
        Process process = builder.start();
        if (!process.waitFor(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS)) {
            process.destroyForcibly();
            throw new AssertionError("submit-job.sh did not finish within " + TIMEOUT);
        }
        String output = new String(process.getInputStream().readAllBytes());
        System.out.println("submit-job.sh exit " + process.exitValue() + ":\n" + output);
        return new Outcome(process.exitValue(), output);
    }

    /** Waits until exactly one job has not ended and it runs; returns its id. */
    private String awaitSingleRunningJob() throws Exception {
        return Eventually.awaitValue("one running job within " + TIMEOUT, TIMEOUT, POLL_INTERVAL, () -> {
            List<JsonNode> notEnded = new ArrayList<>();
            for (JsonNode job : send(HttpRequest.newBuilder(URI.create(restBase + "/jobs/overview")).GET()).path("jobs")) {
                if (!List.of("CANCELED", "FAILED", "FINISHED").contains(job.path("state").asText())) {
                    notEnded.add(job);
                }
            }
            assertThat(notEnded.size()).as("jobs that have not ended").isLessThanOrEqualTo(1);
            if (notEnded.size() == 1 && "RUNNING".equals(notEnded.get(0).path("state").asText())) {
                return Optional.of(notEnded.get(0).path("jid").asText());
            }
            return Optional.empty();
        });
    }

    private void awaitCompletedCheckpoints(String jobId, int count) throws Exception {
        Eventually.await(count + " checkpoints within " + TIMEOUT, TIMEOUT, POLL_INTERVAL,
                () -> checkpoints(jobId).path("counts").path("completed").asInt() >= count);
    }

    private String awaitRestoredCheckpoint(String jobId) throws Exception {
        return Eventually.awaitValue("a restored checkpoint within " + TIMEOUT, TIMEOUT, POLL_INTERVAL, () -> {
            JsonNode restored = checkpoints(jobId).path("latest").path("restored");
            return restored.has("external_path") ? Optional.of(restored.path("external_path").asText()) : Optional.empty();
        });
    }

    private void awaitState(String jobId, String state) throws Exception {
        Eventually.await(state + " within " + TIMEOUT, TIMEOUT, POLL_INTERVAL, () -> state.equals(
                send(HttpRequest.newBuilder(URI.create(restBase + "/jobs/" + jobId)).GET()).path("state").asText()));
    }

    private JsonNode checkpoints(String jobId) throws Exception {
        return send(HttpRequest.newBuilder(URI.create(restBase + "/jobs/" + jobId + "/checkpoints")).GET());
    }

    private JsonNode send(HttpRequest.Builder request) throws Exception {
        HttpResponse<String> response = http.send(request.build(), HttpResponse.BodyHandlers.ofString());
        assertThat(response.statusCode()).as(request.build().uri() + ": " + response.body()).isLessThan(300);
        return response.body().isBlank() ? json.createObjectNode() : json.readTree(response.body());
    }
}
