package io.onceflow.job;

import io.onceflow.api.EventProcessor;
import io.onceflow.job.Onceflow;
import io.onceflow.config.ConfigException;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.config.ProgramArguments;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.stream.Stream;
import org.apache.flink.api.common.JobID;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.CoreOptions;
import org.apache.flink.configuration.ExternalizedCheckpointRetention;
import org.apache.flink.configuration.HighAvailabilityOptions;
import org.apache.flink.configuration.PipelineOptions;
import org.apache.flink.configuration.PipelineOptionsInternal;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.core.execution.CheckpointingMode;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.graph.StreamGraph;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;


class OnceflowJobTest {
    private static final String KAFKA_SECRET = "kafka-secret-value";

    /** The required settings, each with a valid value. */
    static final Map<String, String> REQUIRED = Map.of(
            "kafka.bootstrap.servers", "localhost:9092",
            "input.topics", "payments,orders",
            "input.group.id", "onceflow",
            "output.topic", "processed",
            "dead.letter.topic", "dead-letters",
            "kafka.transactional.id.prefix", "onceflow-test");

    private static OnceflowConfig config(Map<String, String> overrides) {
        Map<String, String> settings = new HashMap<>(REQUIRED);
        settings.put("kafka.properties.sasl.jaas.config", "${JAAS}");
        settings.putAll(overrides);
        return OnceflowConfig.fromMap(settings, Map.of("JAAS", "PlainLoginModule required password=\"" + KAFKA_SECRET + "\";"));
    }

    @Test
    void configuresExactlyOnceCheckpointsRetainedOnCancellationWithRocksDbAndNoKryo() {
        Configuration flink = Onceflow.flinkConfiguration(config(Map.of("checkpoint.interval", "5s", "parallelism", "3")));

        assertThat(flink.get(CheckpointingOptions.CHECKPOINTING_INTERVAL)).isEqualTo(Duration.ofSeconds(5));
        assertThat(flink.get(CheckpointingOptions.CHECKPOINTING_CONSISTENCY_MODE)).isEqualTo(CheckpointingMode.EXACTLY_ONCE);
        assertThat(flink.get(CheckpointingOptions.ENABLE_UNALIGNED)).as("aligned: effects' order rests on it").isFalse();
        assertThat(flink.get(CheckpointingOptions.EXTERNALIZED_CHECKPOINT_RETENTION))
                .isEqualTo(ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION);
        assertThat(flink.get(StateBackendOptions.STATE_BACKEND)).isEqualTo("rocksdb");
        assertThat(flink.get(CheckpointingOptions.INCREMENTAL_CHECKPOINTS)).isTrue();
        assertThat(flink.get(PipelineOptions.GENERIC_TYPES)).isFalse();
        assertThat(flink.get(CoreOptions.DEFAULT_PARALLELISM)).isEqualTo(3);
    }

    @Test
    void theJobParametersFlinksWebUiShowsHoldNoSecret() {
        Configuration flink = Onceflow.flinkConfiguration(config(Map.of()));

        Map<String, String> shown = flink.get(PipelineOptions.GLOBAL_JOB_PARAMETERS);
        assertThat(shown).containsEntry("kafka.properties.sasl.jaas.config", "******");
        assertThat(shown.toString()).doesNotContain(KAFKA_SECRET);
        assertThat(flink.toString()).doesNotContain(KAFKA_SECRET);
    }

    @Test
    void aSecretReadFromAFileReachesTheJobButNotTheJobParameters(@TempDir Path secrets) throws IOException {
        String jaas = "PlainLoginModule required password=\"" + KAFKA_SECRET + "\";";
        Path file = Files.writeString(secrets.resolve("kafka-jaas"), jaas + "\n");
        Map<String, String> settings = new HashMap<>(REQUIRED);
        settings.put("kafka.properties.sasl.jaas.config", "${file:" + file + "}");

        OnceflowConfig config = OnceflowConfig.fromMap(settings, Map.of());
        Configuration flink = Onceflow.flinkConfiguration(config);

        assertThat(config.kafkaClientProperties()).containsEntry("sasl.jaas.config", jaas);
        assertThat(flink.get(PipelineOptions.GLOBAL_JOB_PARAMETERS)).containsEntry("kafka.properties.sasl.jaas.config", "******");
        assertThat(flink.toString()).doesNotContain(KAFKA_SECRET);
    }

    /** The job's graph as configured; building it fails on a Kryo fallback because generic types are disabled. */
    private static StreamGraph jobGraph() {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(
                Onceflow.flinkConfiguration(config(Map.of())));
        OnceflowConfig config = config(Map.of());
        // the sinks as configured, not started: the graph needs no broker or database
        Onceflow.job(config, EventProcessor.passThrough()).defineIn(env, new JobSinks(config).assemble(Optional.empty()));
        return env.getStreamGraph();
    }

    @Test
    void everyOperatorHasAStableUidAndNoGenericType() {
        StreamGraph graph = jobGraph();
        assertThat(graph.getStreamNodes()).allSatisfy(node ->
                assertThat(node.getTransformationUID()).as("uid of " + node.getOperatorName()).isNotBlank());
        assertThat(graph.getStreamNodes()).extracting(node -> node.getTransformationUID())
                .contains(OnceflowPipeline.SOURCE_UID, OnceflowPipeline.DEDUP_UID, OnceflowPipeline.PROCESSOR_UID,
                        OnceflowPipeline.OUTPUT_SINK_UID, OnceflowPipeline.DEAD_LETTER_SINK_UID);
    }

    @Test
    void theDeadLettersOfTheSplitAndOfTheProcessorGoToTheOneDeadLetterSink() {
        StreamGraph graph = jobGraph();
        var deadLetterSinks = graph.getStreamNodes().stream()
                .filter(node -> OnceflowPipeline.DEAD_LETTER_SINK_UID.equals(node.getTransformationUID())).toList();
        assertThat(deadLetterSinks).singleElement().satisfies(sink -> assertThat(sink.getInEdges())
                .extracting(edge -> graph.getStreamNode(edge.getSourceId()).getTransformationUID())
                .containsExactlyInAnyOrder(OnceflowPipeline.SPLIT_UID, OnceflowPipeline.PROCESSOR_UID));
    }

    @Test
    void processorClassNamesAnEventProcessorTheJobCreates() {
        Map<String, String> settings = new HashMap<>(REQUIRED);
        settings.put("processor.class", EventProcessor.PassThrough.class.getName());
        OnceflowConfig config = jobConfig(settings, false);

        assertThat(ProcessorClass.newInstance(config, EventProcessor.class)).containsInstanceOf(EventProcessor.PassThrough.class);
    }

    @Test
    void processorClassMustNameAnEventProcessor() {
        Map<String, String> settings = new HashMap<>(REQUIRED);
        settings.put("processor.class", "java.lang.Thread");

        assertThatThrownBy(() -> jobConfig(settings, false))
                .isInstanceOf(ConfigException.class)
                .hasMessageContaining("processor.class: 'java.lang.Thread' does not implement io.onceflow.api.EventProcessor."
                        + " Name a class that implements io.onceflow.api.EventProcessor.");
    }

    /** The configuration as {@link OnceflowJob#main} (processor not given) or {@code run} reads it. */
    private static OnceflowConfig jobConfig(Map<String, String> settings, boolean processorGiven) {
        String[] args = settings.entrySet().stream()
                .flatMap(setting -> Stream.of("--" + setting.getKey(), setting.getValue()))
                .toArray(String[]::new);
        return ProgramArguments.parse(args, Set.of(), Set.of()).jobConfig(Map.of(), ProcessorClass.implementationOf(EventProcessor.class), processorGiven);
    }

    @Test
    void aJobParallelismThatOverridesFlinksIsAnnounced() {
        assertThat(OnceflowJob.parallelismOverrideWarning(config(Map.of("parallelism", "2")), 3))
                .hasValueSatisfying(warning -> assertThat(warning)
                        .contains("parallelism 2", "Flink's 3", "flink run -p", "Remove 'parallelism'"));
    }

    @Test
    void nothingIsAnnouncedWhenFlinksParallelismApplies() {
        assertThat(OnceflowJob.parallelismOverrideWarning(config(Map.of()), 3)).isEmpty();
        assertThat(OnceflowJob.parallelismOverrideWarning(config(Map.of("parallelism", "3")), 3)).isEmpty();
        // Flink was given no parallelism at all: the cluster would pick one, the job's setting decides
        assertThat(OnceflowJob.parallelismOverrideWarning(config(Map.of("parallelism", "3")), -1)).isEmpty();
    }

    @Test
    void onlyAJobIdFixedPerDeploymentMarksASecondExecutionOfMain() {
        Configuration flink = new Configuration();
        assertThat(JobStart.fixedJobId(flink)).as("session mode: Flink assigns the id at submission").isEmpty();
        flink.set(PipelineOptionsInternal.PIPELINE_FIXED_JOB_ID, "00000000000000000000000000000000");
        assertThat(JobStart.fixedJobId(flink)).as("older Flink's default with HA").isEmpty();
        flink.set(HighAvailabilityOptions.HA_CLUSTER_ID, "/orders");
        flink.set(PipelineOptionsInternal.PIPELINE_FIXED_JOB_ID, new JobID("/orders".hashCode(), 0).toHexString());
        assertThat(JobStart.fixedJobId(flink)).as("Flink 2's default with HA: the same for every deployment of the"
                + " cluster").isEmpty();
        flink.set(PipelineOptionsInternal.PIPELINE_FIXED_JOB_ID, "fc636adbdfdd280ae7d92dd813ab6cc3");
        assertThat(JobStart.fixedJobId(flink)).contains("fc636adbdfdd280ae7d92dd813ab6cc3");
    }

    @Test
    void outsideFlinkTheJobStartsOnlyWithRunLocal() {
        assertThat(OnceflowJob.localStartRefusal(false, false)).get().asString()
                .startsWith("run-local: not given, and this main method was started outside Flink")
                .contains("flink run onceflow-<version>-job.jar", "--run-local");
        assertThat(OnceflowJob.localStartRefusal(false, true)).isEmpty();
        assertThat(OnceflowJob.localStartRefusal(true, false)).as("flink run, REST, application mode").isEmpty();
    }
}
