package io.onceflow.job;

import io.onceflow.api.Event;
import io.onceflow.api.EventProcessor;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.ingest.IngestResult;
import io.onceflow.ingest.KafkaInput;
import java.sql.SQLException;
import java.util.Objects;
import java.util.function.UnaryOperator;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.KafkaSourceBuilder;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.kafka.clients.consumer.OffsetResetStrategy;

/**
 * The whole job a configuration and a processor describe: the Kafka source, the start of the sinks
 * ({@link JobStart}) and the {@link OnceflowPipeline} between them. Obtained from {@link
 * io.onceflow.job.Onceflow#job}; {@link OnceflowJob#main} defines its job with it too.
 *
 * <pre>{@code
 * StreamExecutionEnvironment env =
 *         StreamExecutionEnvironment.getExecutionEnvironment(Onceflow.flinkConfiguration(config));
 * Onceflow.job(config, new PaymentProcessor()).boundedAtLatestOffsets().defineIn(env);
 * env.execute(Onceflow.jobName(config));
 * }</pre>
 */
public final class JobDefinition {
    private final OnceflowConfig config;
    private final EventProcessor processor;
    private final boolean bounded;
    private final UnaryOperator<OnceflowPipeline.Sinks> sinksInPlace;

    /**
     * @param config the validated configuration
     * @param processor the business logic; serialised into the job graph, like any Flink function
     */
    public JobDefinition(OnceflowConfig config, EventProcessor processor) {
        this(Objects.requireNonNull(config, "config"), Objects.requireNonNull(processor, "processor"), false,
                UnaryOperator.identity());
    }

    private JobDefinition(OnceflowConfig config, EventProcessor processor, boolean bounded,
            UnaryOperator<OnceflowPipeline.Sinks> sinksInPlace) {
        this.config = config;
        this.processor = processor;
        this.bounded = bounded;
        this.sinksInPlace = sinksInPlace;
    }

    /**
     * The same job, whose source ends at the input's latest offsets when the job starts, so that the
     * job finishes (tests, demos); the job {@code main} runs never ends.
     *
     * @return a new definition
     */
    public JobDefinition boundedAtLatestOffsets() {
        return new JobDefinition(config, processor, true, sinksInPlace);
    }

    /**
     * The same job, with {@code replace} applied to its started sinks, e.g. to put another
     * PostgreSQL sink in place of onceflow's (the benchmark compares them so).
     *
     * @param replace given the started sinks, returns the sinks to use
     * @return a new definition
     */
    public JobDefinition withSinks(UnaryOperator<OnceflowPipeline.Sinks> replace) {
        Objects.requireNonNull(replace, "replace");
        return new JobDefinition(config, processor, bounded, sinks -> replace.apply(sinksInPlace.apply(sinks)));
    }

    /**
     * Starts the sinks ({@link JobStart}: refuses a fresh start while an earlier run's output is
     * pending, unless {@code fresh.start.pending=discard}, and registers the run of the exactly-once
     * PostgreSQL sink) and adds the pipeline to {@code env}. Call once per submission, just before
     * executing {@code env}.
     *
     * @param env created with {@link FlinkSettings#configuration}; its configuration tells whether
     *     the job restores a savepoint or checkpoint
     * @return the stream of events going to the sinks
     * @throws JobStart.FreshStartRefused with what to do, when a fresh start would discard an
     *     earlier run's pending output
     * @throws IllegalStateException with what to do, when a check of the sinks fails
     * @throws SQLException when PostgreSQL cannot be used
     */
    public DataStream<Event> defineIn(StreamExecutionEnvironment env) throws SQLException {
        OnceflowPipeline.Sinks sinks = sinksInPlace.apply(JobStart.start(config, env));
        return defineIn(env, sinks);
    }

    /**
     * Adds the pipeline with {@code sinks} as given: started by {@link JobStart} (main, which reports
     * a failed start apart from the rest), or not started, for a test of the job graph.
     */
    DataStream<Event> defineIn(StreamExecutionEnvironment env, OnceflowPipeline.Sinks sinks) {
        KafkaSourceBuilder<IngestResult> source = KafkaInput.sourceBuilder(
                config.bootstrapServers(),
                config.kafkaClientProperties(),
                config.inputTopics(),
                config.groupId(),
                startingOffsets(config),
                KafkaInput.deserializer(config.messageIdSourceSpec(), config.maxMessageBytes(), config.maxIdLength(),
                        config.postgres().isPresent(), config.jsonLimits()));
        if (bounded) {
            source.setBounded(OffsetsInitializer.latest());
        }
        KafkaSource<IngestResult> built = source.build();
        return OnceflowPipeline.define(env, built, sinks, config.dedupTtl(), processor, config.processorRetries());
    }

    private static OffsetsInitializer startingOffsets(OnceflowConfig config) {
        switch (config.startingOffsets()) {
            case COMMITTED_OR_EARLIEST:
                return OffsetsInitializer.committedOffsets(OffsetResetStrategy.EARLIEST);
            case COMMITTED_OR_LATEST:
                return OffsetsInitializer.committedOffsets(OffsetResetStrategy.LATEST);
            case EARLIEST:
                return OffsetsInitializer.earliest();
            case LATEST:
                return OffsetsInitializer.latest();
            default:
                throw new IllegalStateException("unhandled starting offsets " + config.startingOffsets());
        }
    }
}
