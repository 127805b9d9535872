package io.onceflow.testing.cluster;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.onceflow.testing.Eventually;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.UUID;

/**
 * The parts of Flink's REST API a user (or a CI pipeline) deploys and watches a job with: upload and
 * run a jar, job and checkpoint status, task managers, metrics, stop with a savepoint. Plain HTTP and
 * JSON, no Flink client classes, so the tests exercise the same interface as {@code curl}.
 */
public final class FlinkRestClient {
    private static final Duration REQUEST_TIMEOUT = Duration.ofSeconds(60);

    private final URI base;
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    private final ObjectMapper json = new ObjectMapper();

    public FlinkRestClient(URI base) {
        this.base = base;
    }

    /** POST /jars/upload (multipart, field {@code jarfile}); returns the jar id. */
    public String uploadJar(Path jar) throws IOException {
        String boundary = "onceflow-" + UUID.randomUUID();
        ByteArrayOutputStream body = new ByteArrayOutputStream();
        body.write(("--" + boundary + "\r\n"
                + "Content-Disposition: form-data; name=\"jarfile\"; filename=\"" + jar.getFileName() + "\"\r\n"
                + "Content-Type: application/x-java-archive\r\n\r\n").getBytes(StandardCharsets.UTF_8));
        body.write(Files.readAllBytes(jar));
        body.write(("\r\n--" + boundary + "--\r\n").getBytes(StandardCharsets.UTF_8));
        JsonNode response = send(HttpRequest.newBuilder(base.resolve("/jars/upload"))
                .header("Content-Type", "multipart/form-data; boundary=" + boundary)
                .POST(HttpRequest.BodyPublishers.ofByteArray(body.toByteArray())));
        String filename = response.path("filename").asText();
        return filename.substring(filename.lastIndexOf('/') + 1);
    }

    /**
     * POST /jars/:jarid/run; returns the job id.
     *
     * @param savepointPath a savepoint or retained checkpoint to restore from, or null for a fresh start
     */
    public String runJar(String jarId, List<String> programArgs, String savepointPath) throws IOException {
        ObjectNode request = json.createObjectNode();
        request.putArray("programArgsList").addAll(programArgs.stream().map(json.getNodeFactory()::textNode).toList());
        if (savepointPath != null) {
            request.put("savepointPath", savepointPath);
            request.put("allowNonRestoredState", false);
        }
        return post("/jars/" + jarId + "/run", request).path("jobid").asText();
    }

    /** GET /jobs/:jobid: the job's state and its vertices' states. */
    public JsonNode job(String jobId) throws IOException {
        return get("/jobs/" + jobId);
    }

    /** The job's exception history (REST {@code /jobs/:id/exceptions}): why it restarted. */
    public JsonNode exceptions(String jobId) throws IOException {
        return get("/jobs/" + jobId + "/exceptions?maxExceptions=5");
    }

    /** True when the job and every one of its tasks run (not merely scheduled or deploying). */
    public boolean isFullyRunning(String jobId) throws IOException {
        JsonNode job = job(jobId);
        if (!"RUNNING".equals(job.path("state").asText())) {
            return false;
        }
        for (JsonNode vertex : job.path("vertices")) {
            JsonNode tasks = vertex.path("tasks");
            if (tasks.path("RUNNING").asInt() != vertex.path("parallelism").asInt()) {
                return false;
            }
        }
        return true;
    }

    /** GET /jobs/:jobid/checkpoints, field {@code counts}: restored, total, in_progress, completed, failed. */
    public JsonNode checkpointCounts(String jobId) throws IOException {
        return checkpoints(jobId).path("counts");
    }

    /** GET /jobs/:jobid/checkpoints: the counts, the latest completed and restored checkpoints, the history. */
    public JsonNode checkpoints(String jobId) throws IOException {
        return get("/jobs/" + jobId + "/checkpoints");
    }

    /**
     * The lowest attempt number among the current executions of the job's subtasks (Flink counts each
     * subtask's executions from 0 within one JobManager's life), or -1 if it has none.
     */
    public int minAttemptNumber(String jobId) throws IOException {
        int lowest = Integer.MAX_VALUE;
        for (JsonNode vertex : job(jobId).path("vertices")) {
            for (JsonNode subtask : get("/jobs/" + jobId + "/vertices/" + vertex.path("id").asText()).path("subtasks")) {
                lowest = Math.min(lowest, subtask.path("attempt").asInt());
            }
        }
        return lowest == Integer.MAX_VALUE ? -1 : lowest;
    }

    /** A job-level metric such as {@code numRestarts}, or -1 if the job does not report it (yet). */
    public long jobMetric(String jobId, String metric) throws IOException {
        for (JsonNode entry : get("/jobs/" + jobId + "/metrics?get=" + metric)) {
            if (metric.equals(entry.path("id").asText())) {
                return entry.path("value").asLong();
            }
        }
        return -1;
    }

    /** GET /taskmanagers: ids with their slot counts. */
    public List<TaskManagerSlots> taskManagers() throws IOException {
        List<TaskManagerSlots> taskManagers = new ArrayList<>();
        for (JsonNode tm : get("/taskmanagers").path("taskmanagers")) {
            taskManagers.add(new TaskManagerSlots(tm.path("id").asText(), tm.path("slotsNumber").asInt(),
                    tm.path("freeSlots").asInt()));
        }
        return taskManagers;
    }

    /** A registered TaskManager and how many of its slots are in use. */
    public record TaskManagerSlots(String id, int slots, int freeSlots) {
        public boolean runsTasks() {
            return freeSlots < slots;
        }
    }

    /** POST /jobs/:jobid/stop (no drain), then polls the operation; returns the savepoint path. */
    public String stopWithSavepoint(String jobId, String targetDirectory, Duration timeout)
            throws IOException, InterruptedException {
        ObjectNode request = json.createObjectNode();
        request.put("targetDirectory", targetDirectory);
        request.put("drain", false);
        String triggerId = post("/jobs/" + jobId + "/stop", request).path("request-id").asText();
        return Eventually.valueWithin(timeout, Duration.ofMillis(200), () -> {
            JsonNode status = get("/jobs/" + jobId + "/savepoints/" + triggerId);
            if (!"COMPLETED".equals(status.path("status").path("id").asText())) {
                return Optional.<String>empty();
            }
            JsonNode operation = status.path("operation");
            if (operation.has("failure-cause")) {
                throw new IllegalStateException("stop with savepoint failed: " + operation.path("failure-cause"));
            }
            return Optional.of(operation.path("location").asText());
        }).orElseThrow(() -> new IllegalStateException(
                "stop with savepoint of " + jobId + " did not finish within " + timeout));
    }

    private JsonNode get(String path) throws IOException {
        return send(HttpRequest.newBuilder(base.resolve(path)).GET());
    }

    private JsonNode post(String path, JsonNode body) throws IOException {
        return send(HttpRequest.newBuilder(base.resolve(path))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(json.writeValueAsString(body))));
    }

    private JsonNode send(HttpRequest.Builder request) throws IOException {
        HttpResponse<String> response;
        try {
            response = http.send(request.timeout(REQUEST_TIMEOUT).build(), HttpResponse.BodyHandlers.ofString());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted", e);
        }
        if (response.statusCode() >= 300) {
            throw new IOException(response.request().method() + " " + response.request().uri() + " answered "
                    + response.statusCode() + ": " + response.body());
        }
        return json.readTree(response.body());
    }
}
