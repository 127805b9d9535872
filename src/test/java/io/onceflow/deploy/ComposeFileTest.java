package io.onceflow.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import io.onceflow.job.Onceflow;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.testing.TestPostgres;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.flink.configuration.MemorySize;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@code docker-compose.yml} cannot run here (no Docker), so this checks it against what the tests do
 * run: the images are the versions Maven resolves, the services have the settings the embedded
 * services have, and the submitted job's arguments pass the job's own configuration parser.
 */
class ComposeFileTest {
    private static JsonNode services;
    private static Map<String, String> pomProperties;

    @BeforeAll
    static void readFiles() throws IOException {
        services = new ObjectMapper(new YAMLFactory()).readTree(Path.of("docker-compose.yml").toFile()).path("services");
        pomProperties = ProjectFiles.pomProperties();
    }

    /** A string as the container gets it: Compose turns {@code $$} into {@code $} and substitutes a lone {@code $}. */
    private static String interpolated(JsonNode value) {
        String text = value.asText();
        assertThat(text.replace("$$", "")).as("'%s' would be substituted from the host's environment", text)
                .doesNotContain("$");
        return text.replace("$$", "$");
    }

    private static List<String> list(JsonNode array) {
        List<String> values = new ArrayList<>();
        array.forEach(value -> values.add(interpolated(value)));
        return values;
    }

    private static OnceflowConfig submittedConfig() {
        JsonNode submit = services.path("submit-job");
        Map<String, String> environment = new HashMap<>();
        submit.path("environment").fields().forEachRemaining(e -> environment.put(e.getKey(), interpolated(e.getValue())));
        return OnceflowConfig.fromArgs(list(submit.path("command")).toArray(String[]::new), environment);
    }

    @Test
    void theImagesAreTheVersionsMavenResolves() {
        assertThat(services.path("kafka").path("image").asText()).isEqualTo("apache/kafka:" + pomProperties.get("kafka.version"));
        assertThat(services.path("postgres").path("image").asText())
                .isEqualTo("postgres:" + pomProperties.get("zonky.binaries.version").split("\\.")[0]);
        for (String flinkService : List.of("flink-data-init", "jobmanager", "taskmanager", "submit-job")) {
            assertThat(services.path(flinkService).path("image").asText()).as(flinkService)
                    .isEqualTo("flink:" + pomProperties.get("flink.version") + "-java17");
        }
    }

    @Test
    void theServicesHaveTheTestServicesSettings() {
        assertThat(list(services.path("postgres").path("command")))
                .as("the test servers' setting, one fixture for the tests and the cluster harness")
                .contains("max_prepared_transactions=" + TestPostgres.MAX_PREPARED_TRANSACTIONS);
        assertThat(interpolated(services.path("postgres").path("healthcheck").path("test").get(1)))
                .as("pg_isready over TCP, not the Unix socket").contains("pg_isready -h 127.0.0.1");
        JsonNode kafka = services.path("kafka").path("environment");
        assertThat(kafka.path("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR").asInt()).isEqualTo(1);
        assertThat(kafka.path("KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR").asInt()).isEqualTo(1);
        assertThat(kafka.path("KAFKA_TRANSACTION_STATE_LOG_MIN_ISR").asInt()).isEqualTo(1);
        assertThat(kafka.path("KAFKA_AUTO_CREATE_TOPICS_ENABLE").asText()).isEqualTo("false");
        assertThat(Duration.ofMillis(kafka.path("KAFKA_TRANSACTION_MAX_TIMEOUT_MS").asLong()))
                .isGreaterThanOrEqualTo(submittedConfig().kafkaTransactionTimeout());
    }

    @Test
    void theSubmittedArgumentsAreAValidJobConfigurationAndItsTopicsAreCreated() {
        OnceflowConfig config = submittedConfig();

        assertThat(config.postgres().orElseThrow().password()).isEqualTo("onceflow");
        assertThat(String.join(" ", list(services.path("submit-job").path("command"))))
                .as("the password reaches the job as a variable, not on the command line")
                .doesNotContain("--postgres.password onceflow");
        Matcher topics = Pattern.compile("for topic in ([^;]+);").matcher(interpolated(
                services.path("create-topics").path("entrypoint").get(2)));
        assertThat(topics.find()).isTrue();
        List<String> created = List.of(topics.group(1).trim().split("\\s+")).stream()
                .map(topicAndPartitions -> topicAndPartitions.split(":")[0]).toList();
        assertThat(created).containsAll(config.inputTopics()).contains(config.outputTopic(), config.deadLetterTopic());
    }

    @Test
    void submissionGoesThroughTheIdempotentScriptWithTheJobsName() {
        JsonNode submit = services.path("submit-job");
        assertThat(String.join(" ", list(submit.path("entrypoint")))).contains("/opt/onceflow/docker/submit-job.sh");
        assertThat(list(submit.path("volumes"))).contains("./docker:/opt/onceflow/docker:ro",
                "./target:/opt/onceflow/target:ro", "flink-data:/var/lib/onceflow:ro");
        assertThat(Files.isRegularFile(Path.of("docker", "submit-job.sh"))).isTrue();
        assertThat(interpolated(submit.path("environment").path("JOB_NAME"))).isEqualTo(Onceflow.jobName(submittedConfig()));
    }

    /**
     * The JobManager's REST API (no authentication) listens on the container's interfaces, so every
     * published port must be on the host's loopback address; the submitter uses Flink's CLI, which does
     * not need the jar upload that flink-conf/ turns off.
     */
    @Test
    void portsArePublishedOnTheHostsLoopbackOnlyAndTheJobIsSubmittedWithoutTheJarUpload() throws IOException {
        List<String> published = new ArrayList<>();
        services.fields().forEachRemaining(service -> published.addAll(list(service.getValue().path("ports"))));

        assertThat(published).isNotEmpty().allSatisfy(port -> assertThat(port).startsWith("127.0.0.1:"));
        assertThat(flinkPropertyText("jobmanager", "rest.bind-address")).isEqualTo("0.0.0.0");
        String script = Files.readString(Path.of("docker", "submit-job.sh"));
        assertThat(script).contains("\"$FLINK\" run -m \"$JOBMANAGER\"").doesNotContain("/jars/");
    }

    @Test
    void theMonitoringProfileScrapesEveryFlinkProcessOnTheReportersPortAndLoadsTheRulesAndTheDashboard()
            throws IOException {
        JsonNode prometheus = services.path("prometheus");
        JsonNode grafana = services.path("grafana");
        assertThat(list(prometheus.path("profiles"))).containsExactly("monitoring");
        assertThat(list(grafana.path("profiles"))).containsExactly("monitoring");
        assertThat(list(prometheus.path("volumes"))).contains(
                "./deploy/monitoring/prometheus.yml:/etc/prometheus/prometheus.yml:ro",
                "./deploy/monitoring/onceflow-alerts.yaml:/etc/prometheus/onceflow-alerts.yaml:ro");
        assertThat(list(grafana.path("volumes"))).contains(
                "./deploy/monitoring/grafana/onceflow-dashboard.json:/var/lib/grafana/dashboards/onceflow-dashboard.json:ro");

        JsonNode config = new ObjectMapper(new YAMLFactory()).readTree(Path.of("deploy", "monitoring", "prometheus.yml").toFile());
        assertThat(list(config.path("rule_files"))).containsExactly("/etc/prometheus/onceflow-alerts.yaml");
        String reporterPorts = ProjectFiles.clusterConfig().getString(
                "metrics.reporter.prom.port", "");
        String firstPort = reporterPorts.split("-")[0];
        List<String> targets = new ArrayList<>();
        for (JsonNode job : config.path("scrape_configs")) {
            job.path("static_configs").forEach(c -> targets.addAll(list(c.path("targets"))));
            job.path("dns_sd_configs").forEach(c -> list(c.path("names"))
                    .forEach(name -> targets.add(name + ":" + c.path("port").asText())));
        }
        assertThat(targets).as("one target per Flink service, on the reporter's port")
                .containsExactlyInAnyOrder("jobmanager:" + firstPort, "taskmanager:" + firstPort);
        assertThat(Path.of("deploy", "monitoring", "grafana", "provisioning", "dashboards", "onceflow.yaml")).isRegularFile();
    }

    @Test
    void theStackFitsInDockerDesktopsDefaultMemory() throws IOException {
        MemorySize jobManager = flinkProperty("jobmanager", "jobmanager.memory.process.size");
        MemorySize taskManager = flinkProperty("taskmanager", "taskmanager.memory.process.size");
        int taskManagers = services.path("taskmanager").path("deploy").path("replicas").asInt(1);
        String kafkaHeap = services.path("kafka").path("environment").path("KAFKA_HEAP_OPTS").asText();

        assertThat(kafkaHeap).contains("-Xmx512m");
        assertThat(jobManager.add(taskManager.multiply(taskManagers)).getMebiBytes()).isLessThanOrEqualTo(4096);
    }

    private static MemorySize flinkProperty(String service, String key) {
        return MemorySize.parse(flinkPropertyText(service, key));
    }

    private static String flinkPropertyText(String service, String key) {
        for (String line : interpolated(services.path(service).path("environment").path("FLINK_PROPERTIES")).split("\n")) {
            if (line.startsWith(key + ":")) {
                return line.substring(key.length() + 1).trim();
            }
        }
        throw new AssertionError(service + " does not set " + key + " in FLINK_PROPERTIES");
    }
}
