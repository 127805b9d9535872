package io.onceflow.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.tuple;

import com.fasterxml.jackson.annotation.JsonIgnoreProperties;
import com.fasterxml.jackson.databind.BeanDescription;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.MappingIterator;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.cfg.MapperConfig;
import com.fasterxml.jackson.databind.introspect.Annotated;
import com.fasterxml.jackson.databind.introspect.AnnotatedMember;
import com.fasterxml.jackson.databind.introspect.BeanPropertyDefinition;
import com.fasterxml.jackson.databind.introspect.JacksonAnnotationIntrospector;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import io.fabric8.kubernetes.api.model.ConfigMap;
import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.ContainerPort;
import io.fabric8.kubernetes.api.model.EnvVar;
import io.fabric8.kubernetes.api.model.GenericKubernetesResource;
import io.fabric8.kubernetes.api.model.PodTemplateSpec;
import io.fabric8.kubernetes.api.model.Quantity;
import io.fabric8.kubernetes.api.model.Secret;
import io.fabric8.kubernetes.api.model.SecretVolumeSource;
import io.fabric8.kubernetes.api.model.Volume;
import io.fabric8.kubernetes.api.model.VolumeMount;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.config.Secrets;
import java.io.IOException;
import java.io.StringReader;
import java.math.BigDecimal;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.HeartbeatManagerOptions;
import org.apache.flink.configuration.HighAvailabilityOptions;
import org.apache.flink.configuration.JobManagerOptions;
import org.apache.flink.configuration.PipelineOptions;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.configuration.WebOptions;
import org.apache.flink.kubernetes.operator.api.FlinkDeployment;
import org.apache.flink.state.rocksdb.RocksDBOptions;
import org.apache.flink.kubernetes.operator.api.spec.JobSpec;
import org.apache.flink.kubernetes.operator.api.spec.JobState;
import org.apache.flink.kubernetes.operator.api.spec.UpgradeMode;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code deploy/kubernetes/} cannot be applied here (no Kubernetes), so this reads its manifests into the
 * Flink Kubernetes Operator's own model and fabric8's Kubernetes model, refusing every field those models
 * do not know, and checks them against what does run here: the build ({@code pom.xml}, the Dockerfile),
 * the cluster configuration ({@code flink-conf/config.yaml}) and the job's own configuration parser.
 */
class KubernetesManifestsTest {
    private static final Path DIRECTORY = Path.of("deploy", "kubernetes");
    /** The container of a pod template that Flink's native Kubernetes integration merges its own into. */
    private static final String MAIN_CONTAINER = "flink-main-container";
    private static final String ROCKSDB_LOCAL_DIR = RocksDBOptions.LOCAL_DIRECTORIES.key();
    private static final Pattern OPERATOR_FLINK_VERSION = Pattern.compile("v(\\d+)_(\\d+)");
    /** A reference onceflow resolves to a file's content (docs/configuration.md, Secrets). */
    private static final Pattern FILE_REFERENCE = Pattern.compile("\\$\\{file:(/[^}:]*)}");
    /** The group of the user flink, who runs Flink in Flink's image (its Dockerfile: groupadd --gid=9999 flink). */
    private static final long FLINK_GROUP = 9999;
    private static final int METRICS_PORT = 9249;
    /** Keys whose values differ from config.yaml's on purpose: shared storage instead of a local disk. */
    private static final Set<String> STORAGE_KEYS = Set.of(CheckpointingOptions.CHECKPOINTS_DIRECTORY.key(),
            CheckpointingOptions.SAVEPOINT_DIRECTORY.key(), HighAvailabilityOptions.HA_STORAGE_PATH.key());
    private static final ObjectMapper YAML = strictMapper();

    private static FlinkDeployment deployment;
    /** {@code spec.flinkVersion} as written; taken out before binding (see {@link #takeFlinkVersion}). */
    private static String flinkVersion;
    private static ConfigMap jobConfig;
    private static Secret secret;
    private static Path secretFile;
    private static GenericKubernetesResource podMonitor;
    /** Every manifest's text, to look for the Secret's values outside it. */
    private static Map<Path, String> texts;

    /**
     * Refuses unknown fields, also in the operator's classes: they declare
     * {@code @JsonIgnoreProperties(ignoreUnknown = true)} so that an operator tolerates newer CRDs' fields,
     * which would let a misspelt field pass here (and be dropped on the cluster).
     */
    private static ObjectMapper strictMapper() {
        ObjectMapper mapper = new ObjectMapper(new YAMLFactory());
        mapper.enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES);
        mapper.setAnnotationIntrospector(new JacksonAnnotationIntrospector() {
            private static final long serialVersionUID = 1L;

            @Override
            public JsonIgnoreProperties.Value findPropertyIgnoralByName(MapperConfig<?> config, Annotated annotated) {
                return super.findPropertyIgnoralByName(config, annotated).withoutIgnoreUnknown();
            }
        });
        return mapper;
    }

    @BeforeAll
    static void readManifests() throws IOException {
        List<Path> files;
        try (Stream<Path> walk = Files.walk(DIRECTORY)) {
            files = walk.filter(file -> file.toString().endsWith(".yaml") || file.toString().endsWith(".yml"))
                    .sorted().toList();
        }
        texts = new LinkedHashMap<>();
        for (Path file : files) {
            texts.put(file, Files.readString(file));
            try (MappingIterator<JsonNode> documents = YAML.readerFor(JsonNode.class).readValues(file.toFile())) {
                while (documents.hasNext()) {
                    JsonNode document = documents.next();
                    if (document != null && !document.isNull()) {
                        bind(file, document);
                    }
                }
            }
        }
        assertThat(Arrays.asList(deployment, jobConfig, secret, podMonitor))
                .as("a FlinkDeployment, a ConfigMap, a Secret and a PodMonitor under " + DIRECTORY).doesNotContainNull();
    }

    private static void bind(Path file, JsonNode document) {
        String kind = document.path("kind").asText();
        switch (kind) {
            case "FlinkDeployment" -> {
                flinkVersion = takeFlinkVersion(document);
                deployment = once(deployment, bound(file, document, FlinkDeployment.class), kind);
            }
            case "ConfigMap" -> jobConfig = once(jobConfig, bound(file, document, ConfigMap.class), kind);
            case "Secret" -> {
                secret = once(secret, bound(file, document, Secret.class), kind);
                secretFile = file;
            }
            // the Prometheus Operator's model is not on the classpath: its fields are checked by hand below
            case "PodMonitor" -> podMonitor = once(podMonitor, bound(file, document, GenericKubernetesResource.class), kind);
            default -> throw new AssertionError(file + ": a " + kind + ", which this test does not check yet: add its checks");
        }
    }

    /**
     * The 1.10.0 model (the newest operator release this build resolves) knows FlinkVersion values up to
     * v1_20; the manifest needs v2_2, which operator 1.13.0 added. So the value is checked on its own
     * ({@link #theOperatorsFlinkVersionIsThePomsFlinkMajorAndMinor}) and removed before binding.
     */
    private static String takeFlinkVersion(JsonNode document) {
        JsonNode spec = document.path("spec");
        String value = spec.path("flinkVersion").asText(null);
        if (spec instanceof ObjectNode fields) {
            fields.remove("flinkVersion");
        }
        return value;
    }

    private static <T> T bound(Path file, JsonNode document, Class<T> type) {
        try {
            return YAML.treeToValue(document, type);
        } catch (IOException e) {
            throw new AssertionError(file + " does not bind to " + type.getName() + ": " + e.getMessage(), e);
        }
    }

    private static <T> T once(T earlier, T value, String kind) {
        assertThat(earlier).as("more than one " + kind + " under " + DIRECTORY + ": say which this test checks").isNull();
        return value;
    }

    @Test
    void noManifestHasAFieldTheModelsKeptAsideAsUnknown() {
        // fabric8's classes (Pod, Container, ConfigMap...) take unknown fields into additionalProperties
        // instead of failing, so a misspelt field in a pod template binds without an error
        List<String> unknown = new ArrayList<>();
        Set<Object> seen = Collections.newSetFromMap(new IdentityHashMap<>());
        collectUnknownFields(deployment, "FlinkDeployment", unknown, seen);
        collectUnknownFields(jobConfig, "ConfigMap", unknown, seen);
        collectUnknownFields(secret, "Secret", unknown, seen);

        assertThat(unknown).as("fields the Kubernetes model does not know (misspelt, or misplaced)").isEmpty();
    }

    private static void collectUnknownFields(Object value, String path, List<String> unknown, Set<Object> seen) {
        if (value instanceof Map<?, ?> map) {
            map.forEach((key, entry) -> collectUnknownFields(entry, path + "." + key, unknown, seen));
        } else if (value instanceof Collection<?> list) {
            int index = 0;
            for (Object element : list) {
                collectUnknownFields(element, path + "[" + index++ + "]", unknown, seen);
            }
        } else if (value instanceof Object[] array) {
            collectUnknownFields(Arrays.asList(array), path, unknown, seen);
        } else if (value != null && isModel(value.getClass()) && seen.add(value)) {
            BeanDescription bean = YAML.getSerializationConfig().introspect(YAML.constructType(value.getClass()));
            AnnotatedMember anyGetter = bean.findAnyGetter();
            if (anyGetter != null && anyGetter.getValue(value) instanceof Map<?, ?> extra && !extra.isEmpty()) {
                unknown.add(path + ": " + extra.keySet());
            }
            for (BeanPropertyDefinition property : bean.findProperties()) {
                if (property.getAccessor() != null) {
                    collectUnknownFields(property.getAccessor().getValue(value), path + "." + property.getName(), unknown, seen);
                }
            }
        }
    }

    private static boolean isModel(Class<?> type) {
        String name = type.getName();
        return name.startsWith("io.fabric8.kubernetes.api.model.") || name.startsWith("org.apache.flink.kubernetes.operator.api.");
    }

    @Test
    void theOperatorsFlinkVersionIsThePomsFlinkMajorAndMinor() {
        Matcher version = OPERATOR_FLINK_VERSION.matcher(String.valueOf(flinkVersion));
        String flink = ProjectFiles.pomProperties().get("flink.version");
        String[] pom = flink.split("\\.");

        assertThat(version.matches()).as("spec.flinkVersion '%s' is v<major>_<minor>", flinkVersion).isTrue();
        assertThat(version.group(1) + "." + version.group(2)).as("spec.flinkVersion against pom.xml's flink.version " + flink)
                .isEqualTo(pom[0] + "." + pom[1]);
    }

    @Test
    void theImageIsTheDockerfilesFlinkAndJobJarAndRunsTheJobsMainClass() throws IOException {
        Map<String, String> pom = ProjectFiles.pomProperties();
        String flink = pom.get("flink.version");
        List<String> dockerfile = Files.readAllLines(DIRECTORY.resolve("Dockerfile")).stream().map(String::strip)
                .filter(line -> !line.isEmpty() && !line.startsWith("#")).toList();
        List<String> copies = dockerfile.stream().filter(line -> line.startsWith("COPY ")).toList();
        List<String> jarArguments = dockerfile.stream().filter(line -> line.startsWith("ARG JOB_JAR=")).toList();
        JobSpec job = deployment.getSpec().getJob();
        String image = deployment.getSpec().getImage();

        assertThat(dockerfile.stream().filter(line -> line.startsWith("FROM "))).as("the Dockerfile's base image: Flink's classes are provided")
                .containsExactly("FROM flink:" + flink + "-java" + pom.get("maven.compiler.release"));
        assertThat(jarArguments).as("the build argument JOB_JAR, by default the jar mvn package builds")
                .containsExactly("ARG JOB_JAR=target/" + ProjectFiles.jobJarName());
        assertThat(copies).as("the Dockerfile copies the job jar, once").hasSize(1);
        assertThat(Arrays.stream(copies.get(0).split("\\s+")).skip(1).filter(word -> !word.startsWith("--")))
                .as("COPY <the jar JOB_JAR names> <where job.jarURI points>")
                .containsExactly("${JOB_JAR}", job.getJarURI().replaceFirst("^local://", ""));
        assertThat(job.getJarURI()).as("jarURI: the jar inside the image").startsWith("local:///");
        assertThat(image.substring(image.lastIndexOf(':') + 1)).as("the image tag <onceflow version>-flink<Flink version>")
                .isEqualTo(ProjectFiles.projectVersion() + "-flink" + flink);
        assertThat(job.getEntryClass()).as("entryClass: the job jar's main class").isEqualTo(ProjectFiles.jobMainClass());
    }

    @Test
    void upgradesAndSuspendsStopTheJobWithASavepointAndNothingElseRestores() {
        JobSpec job = deployment.getSpec().getJob();
        Map<String, String> flink = deployment.getSpec().getFlinkConfiguration();

        assertThat(job.getUpgradeMode()).as("upgradeMode: a stop-with-savepoint commits the sinks' transactions").isEqualTo(UpgradeMode.SAVEPOINT);
        assertThat(job.getState()).isEqualTo(JobState.RUNNING);
        assertThat(job.getAllowNonRestoredState()).as("allowNonRestoredState would drop state silently").isNotEqualTo(Boolean.TRUE);
        assertThat(flink).as("stop-with-savepoint must not drain (end of input)")
                .containsEntry("kubernetes.operator.job.drain-on-savepoint-deletion", "false")
                .as("no last-state fallback: onceflow's main would take that start for a fresh one")
                .containsEntry("kubernetes.operator.job.upgrade.last-state-fallback.enabled", "false")
                .as("a rescale is a savepoint upgrade, not an in-place rescale")
                .containsEntry("kubernetes.operator.job.upgrade.inplace-scaling.enabled", "false")
                .as("the operator must not dispose of the savepoints a rollback needs")
                .containsEntry("kubernetes.operator.savepoint.cleanup.enabled", "false")
                .as("deleting the FlinkDeployment commits the open transactions first")
                .containsEntry("kubernetes.operator.job.savepoint-on-deletion", "true")
                .as("periodic savepoints of a running job do not commit its transactions: never restore points")
                .doesNotContainKey("kubernetes.operator.periodic.savepoint.interval");
        assertThat(flink.get("kubernetes.operator.deployment.rollback.enabled"))
                .as("the operator's rollback restores through last-state").isNotEqualTo("true");
    }

    @Test
    void theArgumentsAndTheMountedSettingsAreAValidJobConfiguration(@TempDir Path directory) throws IOException {
        OnceflowConfig config = submittedConfig(directory);
        int parallelism = deployment.getSpec().getJob().getParallelism();
        String maxParallelism = deployment.getSpec().getFlinkConfiguration().get(PipelineOptions.MAX_PARALLELISM.key());

        assertThat(config.postgres()).as("the PostgreSQL sink").isPresent();
        assertThat(config.postgres().get().password()).as("postgres.password: the Secret's key, read from its mounted file")
                .isEqualTo(secret.getStringData().get("postgres-password"));
        assertThat(config.parallelism()).as("a parallelism in job.properties would win over spec.job.parallelism").isEmpty();
        assertThat(maxParallelism).as(PipelineOptions.MAX_PARALLELISM.key() + ": the key groups, fixed for the life of the job")
                .isNotNull();
        assertThat(parallelism).as("spec.job.parallelism").isBetween(1, Integer.parseInt(maxParallelism));
    }

    @Test
    void secretsReachTheJobOnlyAsFilesOfTheSecretMountedOnTheJobManager() throws IOException {
        String mountPath = secretMount().getMountPath();
        String jobProperties = mountedConfigFile(configFileArgument());
        Map<String, String> settings = new TreeMap<>();
        Properties properties = new Properties();
        properties.load(new StringReader(jobProperties));
        properties.forEach((key, value) -> settings.put("job.properties: " + key, value.toString()));
        argumentPairs(List.of(deployment.getSpec().getJob().getArgs()))
                .forEach((key, value) -> settings.put("args: --" + key, value));

        settings.forEach((where, value) -> {
            if (Secrets.isSecretKey(where.substring(where.indexOf(' ') + 1))) {
                assertThat(FILE_REFERENCE.matcher(value.strip()).matches())
                        .as("%s is a secret: give it as ${file:PATH} of the mounted Secret, never as a value", where).isTrue();
            }
        });
        // every reference, also in the commented SASL example, is a file of the mounted Secret: one of its keys
        // (commented there too, when the example is)
        Matcher reference = FILE_REFERENCE.matcher(jobProperties);
        List<String> keys = new ArrayList<>();
        while (reference.find()) {
            String path = reference.group(1);
            assertThat(path).as("%s: a file of the Secret the JobManager mounts at %s", path, mountPath).startsWith(mountPath + "/");
            keys.add(path.substring(mountPath.length() + 1));
        }
        assertThat(keys).as("the keys job.properties refers to").contains("postgres-password", "kafka-jaas")
                .allSatisfy(key -> assertThat(Pattern.compile("^\\s*#?\\s*" + Pattern.quote(key) + ":", Pattern.MULTILINE)
                        .matcher(texts.get(secretFile)).find()).as("%s names the key %s", secretFile, key).isTrue());
        assertThat(deployment.getSpec().getFlinkConfiguration().keySet().stream().filter(Secrets::isSecretKey))
                .as("flinkConfiguration is shown by the operator's status and Flink's web UI: no secrets there").isEmpty();
        assertThat(environment(mainContainer("taskManager")).values().stream().filter(KubernetesManifestsTest::fromSecret))
                .as("the TaskManagers get the resolved settings in the job graph: they need no secret").isEmpty();
        assertThat(podTemplate("taskManager").getSpec().getVolumes()).as("the TaskManagers mount no Secret")
                .allSatisfy(volume -> assertThat(volume.getSecret()).isNull());
        for (String placeholder : secret.getStringData().values()) {
            texts.forEach((file, text) -> assertThat(file.equals(secretFile) || !text.contains(placeholder))
                    .as("%s holds the Secret's value", file).isTrue());
        }
        assertThat(secretFile.getParent()).as("the example Secret stays out of `kubectl apply -f " + DIRECTORY + "/`")
                .isNotEqualTo(DIRECTORY);
    }

    @Test
    void theJobManagerMountsTheSecretReadOnlyForTheJobsUserOnly() {
        VolumeMount mount = secretMount();
        SecretVolumeSource volume = volume("jobManager", mount.getName()).getSecret();

        assertThat(mount.getReadOnly()).as("the Secret's mount is read-only").isTrue();
        assertThat(volume.getSecretName()).as("the mounted Secret").isEqualTo(secret.getMetadata().getName());
        assertThat(volume.getItems()).as("every key of the Secret a file of its own name").isNullOrEmpty();
        assertThat(volume.getDefaultMode()).as("the files' mode: 0400, read by the owner only").isEqualTo(0400);
        assertThat(podTemplate("jobManager").getSpec().getSecurityContext().getFsGroup())
                .as("fsGroup: the flink user's group in Flink's image, which the kubelet lets read the files (0440)")
                .isEqualTo(FLINK_GROUP);
    }

    @Test
    void stateIsOnDurableStorageWithKubernetesHighAvailability() {
        Map<String, String> flink = deployment.getSpec().getFlinkConfiguration();
        String s3Plugin = "flink-s3-fs-hadoop-" + ProjectFiles.pomProperties().get("flink.version") + ".jar";

        for (String key : STORAGE_KEYS) {
            assertThat(flink.get(key)).as(key).isNotBlank();
            assertThat(URI.create(flink.get(key)).getScheme()).as("%s must outlive the pods: shared storage, not a pod's disk", key)
                    .isNotNull().isNotEqualTo("file");
        }
        assertThat(flink.get(HighAvailabilityOptions.HA_MODE.key())).as(HighAvailabilityOptions.HA_MODE.key()).isEqualTo("kubernetes");
        if (STORAGE_KEYS.stream().anyMatch(key -> flink.get(key).startsWith("s3"))) {
            for (String role : List.of("jobManager", "taskManager")) {
                EnvVar plugins = environment(mainContainer(role)).get("ENABLE_BUILT_IN_PLUGINS");
                assertThat(plugins == null ? "" : plugins.getValue()).as("%s: s3:// needs Flink's S3 plugin on every pod", role)
                        .contains(s3Plugin);
            }
        }
    }

    @Test
    void rocksDbWorksOnALocalDiskVolumeThatTheTaskManagerRequestsAndLimits() {
        String localDir = deployment.getSpec().getFlinkConfiguration().get(ROCKSDB_LOCAL_DIR);
        Container taskManager = mainContainer("taskManager");
        VolumeMount mount = taskManager.getVolumeMounts().stream().filter(candidate -> candidate.getMountPath().equals(localDir))
                .findFirst().orElseThrow(() -> new AssertionError(ROCKSDB_LOCAL_DIR + " = " + localDir
                        + " is on no volume of the TaskManager: RocksDB would fill the container's writable layer"));
        Volume volume = volume("taskManager", mount.getName());
        Quantity request = taskManager.getResources().getRequests().get("ephemeral-storage");
        Quantity limit = taskManager.getResources().getLimits().get("ephemeral-storage");

        assertThat(volume.getEmptyDir()).as("the node's local disk: an emptyDir").isNotNull();
        assertThat(mount.getReadOnly()).as("RocksDB writes there").isNotEqualTo(Boolean.TRUE);
        assertThat(request).as("an ephemeral-storage request, so the pod lands on a node with the disk").isNotNull();
        assertThat(limit).as("an ephemeral-storage limit").isNotNull();
        assertThat(Quantity.getAmountInBytes(request)).as("100M ids per TaskManager x 24.7 B x 4 (docs/sizing.md)")
                .isGreaterThanOrEqualTo(new BigDecimal(10L << 30));
        assertThat(Quantity.getAmountInBytes(volume.getEmptyDir().getSizeLimit())).as("the volume's sizeLimit")
                .isBetween(Quantity.getAmountInBytes(request), Quantity.getAmountInBytes(limit));
    }

    @Test
    void applicationModeRunsWithoutTheJarUploadOfTheUnauthenticatedRestApi() {
        Map<String, String> flink = deployment.getSpec().getFlinkConfiguration();

        assertThat(flink.get(WebOptions.SUBMIT_ENABLE.key())).as(WebOptions.SUBMIT_ENABLE.key()).isEqualTo("false");
        assertThat(flink).as("the JobManager's Service stays of Flink's default type, ClusterIP")
                .doesNotContainKey("kubernetes.rest-service.exposed.type");
    }

    @Test
    void theFlinkSettingsAreThoseOfTheClusterConfiguration() {
        Map<String, String> cluster = ProjectFiles.clusterConfig().toMap();
        Map<String, String> flink = deployment.getSpec().getFlinkConfiguration();
        List<String> required = Stream.of(CheckpointingOptions.CHECKPOINTING_CONSISTENCY_MODE,
                CheckpointingOptions.CHECKPOINTING_INTERVAL, CheckpointingOptions.CHECKPOINTING_TIMEOUT,
                CheckpointingOptions.EXTERNALIZED_CHECKPOINT_RETENTION, CheckpointingOptions.MAX_RETAINED_CHECKPOINTS,
                StateBackendOptions.STATE_BACKEND, CheckpointingOptions.INCREMENTAL_CHECKPOINTS,
                RestartStrategyOptions.RESTART_STRATEGY, JobManagerOptions.EXECUTION_FAILOVER_STRATEGY,
                HeartbeatManagerOptions.HEARTBEAT_INTERVAL, HeartbeatManagerOptions.HEARTBEAT_TIMEOUT,
                HeartbeatManagerOptions.HEARTBEAT_RPC_FAILURE_THRESHOLD).map(ConfigOption::key).toList();
        List<String> different = new ArrayList<>();
        flink.forEach((key, value) -> {
            if (cluster.containsKey(key) && !STORAGE_KEYS.contains(key) && !words(value).equals(words(cluster.get(key)))) {
                different.add(key + ": '" + value + "' here, '" + cluster.get(key) + "' in config.yaml");
            }
        });

        assertThat(flink).as("the settings of flink-conf/config.yaml that the guarantee and the recovery depend on").containsKeys(required.toArray(String[]::new));
        assertThat(different).as("flinkConfiguration against flink-conf/config.yaml").isEmpty();
    }

    @Test
    void everyPodExposesThePrometheusReporterAndThePodMonitorScrapesIt() {
        Map<String, String> flink = deployment.getSpec().getFlinkConfiguration();
        JsonNode spec = YAML.valueToTree(podMonitor.getAdditionalProperties().get("spec"));
        Map<String, String> selected = YAML.convertValue(spec.path("selector").path("matchLabels"), YAML.getTypeFactory()
                .constructMapType(Map.class, String.class, String.class));

        assertThat(flink).containsEntry("metrics.reporter.prom.factory.class", "org.apache.flink.metrics.prometheus.PrometheusReporterFactory")
                .hasEntrySatisfying("metrics.reporter.prom.port", ports -> assertThat(ports.split("-")[0])
                        .as("the port a pod's one Flink process takes").isEqualTo(String.valueOf(METRICS_PORT)));
        for (String role : List.of("jobManager", "taskManager")) {
            assertThat(mainContainer(role).getPorts()).as(role + "'s ports").extracting(ContainerPort::getName, ContainerPort::getContainerPort)
                    .contains(tuple("metrics", METRICS_PORT));
            assertThat(podTemplate(role).getMetadata().getLabels()).as(role + "'s labels, which the PodMonitor selects")
                    .containsAllEntriesOf(selected);
        }
        assertThat(podMonitor.getApiVersion()).isEqualTo("monitoring.coreos.com/v1");
        assertThat(selected).as("the PodMonitor's selector.matchLabels").isNotEmpty();
        assertThat(fieldNames(spec)).as("PodMonitor spec fields").isSubsetOf("selector", "podMetricsEndpoints", "namespaceSelector",
                "jobLabel", "podTargetLabels", "sampleLimit");
        for (JsonNode endpoint : spec.path("podMetricsEndpoints")) {
            assertThat(fieldNames(endpoint)).as("podMetricsEndpoints fields").isSubsetOf("port", "path", "interval",
                    "scrapeTimeout", "scheme", "honorLabels", "honorTimestamps", "relabelings", "metricRelabelings");
        }
        assertThat(spec.path("podMetricsEndpoints").findValuesAsText("port")).as("the endpoints scrape the port named metrics").contains("metrics");
    }

    @Test
    void eachRoleHasItsOwnCompletePodTemplateAndOnlyTheJobManagerMountsTheSettings() {
        assertThat(deployment.getSpec().getPodTemplate())
                .as("spec.podTemplate: the operator merges it into the role templates by list position (env, ports, volumes)")
                .isNull();
        assertThat(mainContainer("taskManager").getVolumeMounts()).extracting(VolumeMount::getName)
                .as("the TaskManagers do not read job.properties: they mount only RocksDB's disk").containsExactly("rocksdb");
        assertThat(mountedConfigFile(configFileArgument())).as("job.properties on the JobManager, where main runs").isNotBlank();
    }

    /** What main reads on the JobManager: the mounted job.properties, with the Secret's files under {@code directory}. */
    private static OnceflowConfig submittedConfig(Path directory) throws IOException {
        String mountPath = secretMount().getMountPath();
        Path mounted = Files.createDirectories(directory.resolve(mountPath.substring(1)));
        for (Map.Entry<String, String> key : secret.getStringData().entrySet()) {
            Files.writeString(mounted.resolve(key.getKey()), key.getValue());
        }
        List<String> args = new ArrayList<>(List.of(deployment.getSpec().getJob().getArgs()));
        Path file = directory.resolve("job.properties");
        Files.writeString(file, mountedConfigFile(configFileArgument()).replace("${file:" + mountPath + "/", "${file:" + mounted + "/"));
        args.set(args.indexOf("--config") + 1, file.toString());
        Map<String, String> environment = new TreeMap<>();
        environment(mainContainer("jobManager")).forEach((name, variable) ->
                environment.put(name, Objects.requireNonNullElse(variable.getValue(), "")));
        return OnceflowConfig.fromArgs(args.toArray(String[]::new), environment);
    }

    /** The JobManager's mount of the Secret's volume, where main reads the secrets. */
    private static VolumeMount secretMount() {
        List<VolumeMount> mounts = mainContainer("jobManager").getVolumeMounts().stream()
                .filter(mount -> volume("jobManager", mount.getName()).getSecret() != null).toList();
        assertThat(mounts).as("the JobManager's mounts of a Secret").hasSize(1);
        return mounts.get(0);
    }

    /** The volume of a role's pod template that a mount names. */
    private static Volume volume(String role, String name) {
        return podTemplate(role).getSpec().getVolumes().stream().filter(candidate -> candidate.getName().equals(name))
                .findFirst().orElseThrow(() -> new AssertionError("the " + role + " mounts an undefined volume " + name));
    }

    private static String configFileArgument() {
        List<String> args = List.of(deployment.getSpec().getJob().getArgs());
        int config = args.indexOf("--config");
        assertThat(config).as("job.args name the settings file as --config FILE").isNotNegative().isLessThan(args.size() - 1);
        return args.get(config + 1);
    }

    /** The content of the ConfigMap entry that the JobManager sees at {@code path}, through its volume mounts. */
    private static String mountedConfigFile(String path) {
        for (VolumeMount mount : mainContainer("jobManager").getVolumeMounts()) {
            if (path.startsWith(mount.getMountPath() + "/")) {
                Volume volume = volume("jobManager", mount.getName());
                String key = path.substring(mount.getMountPath().length() + 1);
                assertThat(volume.getConfigMap()).as("the volume holding " + path).isNotNull();
                assertThat(volume.getConfigMap().getName()).as(path + "'s ConfigMap").isEqualTo(jobConfig.getMetadata().getName());
                assertThat(jobConfig.getData()).as("the ConfigMap's entries").containsKey(key);
                return jobConfig.getData().get(key);
            }
        }
        throw new AssertionError("--config " + path + " is on no volume of the JobManager, where main runs in application mode");
    }

    private static PodTemplateSpec podTemplate(String role) {
        PodTemplateSpec template = role.equals("jobManager") ? deployment.getSpec().getJobManager().getPodTemplate()
                : deployment.getSpec().getTaskManager().getPodTemplate();
        assertThat(template).as(role + ".podTemplate").isNotNull();
        return template;
    }

    private static Container mainContainer(String role) {
        return podTemplate(role).getSpec().getContainers().stream().filter(container -> MAIN_CONTAINER.equals(container.getName()))
                .findFirst().orElseThrow(() -> new AssertionError(role + "'s pod template has no container named "
                        + MAIN_CONTAINER + ", the one Flink merges its own into: its settings would go to a second container"));
    }

    private static Map<String, EnvVar> environment(Container container) {
        Map<String, EnvVar> variables = new LinkedHashMap<>();
        container.getEnv().forEach(variable -> variables.put(variable.getName(), variable));
        return variables;
    }

    private static boolean fromSecret(EnvVar variable) {
        return variable.getValueFrom() != null && variable.getValueFrom().getSecretKeyRef() != null;
    }

    /** {@code --key value} and {@code --key=value} pairs, by key. */
    private static Map<String, String> argumentPairs(List<String> args) {
        Map<String, String> pairs = new LinkedHashMap<>();
        for (int i = 0; i < args.size(); i++) {
            String argument = args.get(i).replaceFirst("^--", "");
            int equals = argument.indexOf('=');
            if (equals >= 0) {
                pairs.put(argument.substring(0, equals), argument.substring(equals + 1));
            } else {
                pairs.put(argument, i + 1 < args.size() ? args.get(++i) : "");
            }
        }
        return pairs;
    }

    private static List<String> words(String value) {
        return List.of(value.strip().split("\\s+"));
    }

    private static List<String> fieldNames(JsonNode node) {
        List<String> names = new ArrayList<>();
        node.fieldNames().forEachRemaining(names::add);
        return names;
    }
}
