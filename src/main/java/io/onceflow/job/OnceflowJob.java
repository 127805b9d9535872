package io.onceflow.job;

import io.onceflow.config.ConfigException;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.config.PostgresSettings;
import io.onceflow.config.StateBackendKind;
import io.onceflow.ingest.Event;
import io.onceflow.ingest.IngestDeserializer;
import io.onceflow.ingest.IngestResult;
import io.onceflow.ingest.KafkaInput;
import io.onceflow.ingest.MessageIdSource;
import io.onceflow.sink.kafka.KafkaSinks;
import io.onceflow.sink.postgres.PostgresSchema;
import io.onceflow.sink.postgres.PostgresSink;
import io.onceflow.sink.postgres.PostgresSinkBuilder;
import java.sql.SQLException;
import java.util.List;
import java.util.Optional;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.CoreOptions;
import org.apache.flink.configuration.ExternalizedCheckpointRetention;
import org.apache.flink.configuration.PipelineOptions;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.source.KafkaSourceBuilder;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.core.execution.CheckpointingMode;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.kafka.clients.consumer.OffsetResetStrategy;

/**
 * The entry point users submit: reads the configuration, checks it before anything starts, and
 * wires it to {@link OnceflowPipeline}. Exits with status 2 and every configuration problem listed
 * when the configuration is invalid.
 */
public final class OnceflowJob {
    private OnceflowJob() {}

    /** Printed instead of running the job: the DDL of the configured tables, for DBAs who create them by hand. */
    static final String PRINT_POSTGRES_DDL = "--print-postgres-ddl";

    public static void main(String[] args) throws Exception {
        if (args.length == 1 && ("--help".equals(args[0]) || "-h".equals(args[0]))) {
            System.out.println(OnceflowConfig.usage());
            return;
        }
        boolean printDdl = List.of(args).contains(PRINT_POSTGRES_DDL);
        OnceflowConfig config;
        try {
            config = OnceflowConfig.fromArgs(
                    List.of(args).stream().filter(arg -> !arg.equals(PRINT_POSTGRES_DDL)).toArray(String[]::new),
                    System.getenv());
        } catch (ConfigException e) {
            System.err.println(e.getMessage());
            System.exit(2);
            return;
        }
        if (printDdl) {
            PostgresSettings postgres = config.postgres().orElseThrow(() ->
                    new IllegalArgumentException(PRINT_POSTGRES_DDL + " needs postgres.url (and the table settings)"));
            System.out.print(schema(postgres).ddl());
            return;
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(flinkConfiguration(config));
        // fail before submitting, with a message that says what to fix, rather than in a restart loop
        OnceflowPipeline.Sinks sinks = startSinks(env, config);
        defineJob(env, config, sinks, EventProcessor.passThrough());
        env.execute(jobName(config));
    }

    /** The PostgreSQL sink's tables, as configured. */
    public static PostgresSchema schema(PostgresSettings postgres) {
        return new PostgresSchema(postgres.table(), postgres.rejectsTable(), postgres.commitLogTable(),
                postgres.runsTable(), postgres.writersTable());
    }

    /** The job name shown in Flink's UI: names the input and output, never a secret. */
    public static String jobName(OnceflowConfig config) {
        return "onceflow " + String.join(",", config.inputTopics()) + " -> " + config.outputTopic();
    }

    /**
     * Adds the configured pipeline, with the real Kafka source and the sinks from
     * {@link #startSinks}, to {@code env}.
     */
    public static void defineJob(StreamExecutionEnvironment env, OnceflowConfig config, OnceflowPipeline.Sinks sinks,
            EventProcessor processor) {
        OnceflowPipeline.define(env, kafkaSourceBuilder(config).build(), sinks, config.dedupTtl(), processor);
    }

    /**
     * Does what must happen once per submission before the job graph is built, and returns the
     * configured sinks: refuses a fresh start while an earlier run's output is pending (unless
     * {@code fresh.start.pending=discard}), and checks the database and registers the run of the
     * exactly-once PostgreSQL sink (see {@link PostgresSink#startRun}).
     *
     * @param env its configuration tells whether the job restores a savepoint or checkpoint, and
     *     where checkpoints are retained
     * @throws IllegalStateException saying what to do, when the start is refused or a check fails
     */
    public static OnceflowPipeline.Sinks startSinks(StreamExecutionEnvironment env, OnceflowConfig config)
            throws SQLException {
        return SinkStart.start(config, env.getConfiguration(), env.getParallelism(), jobName(config));
    }

    /** The job's Kafka source, unbounded until a caller (a test, the demo) bounds it. */
    public static KafkaSourceBuilder<IngestResult> kafkaSourceBuilder(OnceflowConfig config) {
        return KafkaInput.sourceBuilder(
                        config.bootstrapServers(),
                        config.kafkaClientProperties(),
                        config.inputTopics(),
                        config.groupId(),
                        startingOffsets(config),
                        ingestDeserializer(config));
    }

    /**
     * Judges each input record as the job does (also for the audit): the configured id source and
     * limits, and, when a PostgreSQL sink stores the ids, the byte limit of its primary key.
     */
    public static IngestDeserializer ingestDeserializer(OnceflowConfig config) {
        return new IngestDeserializer(
                MessageIdSource.parse(config.messageIdSourceSpec()),
                config.maxMessageBytes(),
                config.maxIdLength(),
                config.postgres().isPresent() ? IngestDeserializer.POSTGRES_MAX_ID_BYTES : Integer.MAX_VALUE);
    }

    /**
     * The configured sinks: the two Kafka sinks, and the PostgreSQL sink when {@code postgres.url}
     * is set.
     *
     * @param startedPostgres the exactly-once PostgreSQL sink after {@link PostgresSink#startRun};
     *     required when the configuration asks for one, ignored for at-least-once
     */
    static OnceflowPipeline.Sinks sinks(OnceflowConfig config, Optional<PostgresSink> startedPostgres) {
        KafkaSinks kafka = new KafkaSinks(
                config.bootstrapServers(),
                config.kafkaClientProperties(),
                config.deliveryGuarantee(),
                config.transactionalIdPrefix(),
                config.kafkaTransactionTimeout());
        Optional<Sink<Event>> postgres = config.postgres().map(settings ->
                config.deliveryGuarantee() == DeliveryGuarantee.EXACTLY_ONCE
                        ? startedPostgres.orElseThrow(() -> new IllegalStateException(
                                "the exactly-once PostgreSQL sink must be started (PostgresSink.startRun) first"))
                        : postgresSink(config).buildAtLeastOnce());
        return new OnceflowPipeline.Sinks(
                kafka.output(config.outputTopic()), kafka.deadLetters(config.deadLetterTopic()), postgres);
    }

    /** A builder with the configured PostgreSQL settings; call only when {@code postgres.url} is set. */
    static PostgresSinkBuilder postgresSink(OnceflowConfig config) {
        PostgresSettings settings = config.postgres().orElseThrow();
        return PostgresSink.builder()
                .setJdbcUrl(settings.url())
                .setUser(settings.user())
                .setPassword(settings.password())
                .setTable(settings.table())
                .setRejectsTable(settings.rejectsTable())
                .setCommitLogTable(settings.commitLogTable())
                .setRunsTable(settings.runsTable())
                .setWritersTable(settings.writersTable())
                .setSinkPrefix(settings.sinkPrefix())
                .setBatchSize(settings.batchSize())
                .setTolerableCheckpointFailures(config.tolerableCheckpointFailures());
    }

    static OffsetsInitializer startingOffsets(OnceflowConfig config) {
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

    /**
     * The Flink settings the configuration implies: exactly-once checkpoints (the sinks' transactions
     * commit on them), retained on cancellation, the state backend, no Kryo fallback, object reuse,
     * and the redacted configuration as the job parameters Flink's web UI shows.
     */
    public static Configuration flinkConfiguration(OnceflowConfig config) {
        Configuration flink = new Configuration();
        flink.set(CheckpointingOptions.CHECKPOINTING_INTERVAL, config.checkpointInterval());
        flink.set(CheckpointingOptions.CHECKPOINTING_CONSISTENCY_MODE, CheckpointingMode.EXACTLY_ONCE);
        flink.set(CheckpointingOptions.CHECKPOINTING_TIMEOUT, config.checkpointTimeout());
        flink.set(CheckpointingOptions.MIN_PAUSE_BETWEEN_CHECKPOINTS, config.checkpointMinPause());
        flink.set(CheckpointingOptions.TOLERABLE_FAILURE_NUMBER, config.tolerableCheckpointFailures());
        flink.set(CheckpointingOptions.EXTERNALIZED_CHECKPOINT_RETENTION,
                ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION);
        config.checkpointDir().ifPresent(dir -> flink.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, dir));
        if (config.stateBackend() == StateBackendKind.ROCKSDB) {
            flink.set(StateBackendOptions.STATE_BACKEND, "rocksdb");
            flink.set(CheckpointingOptions.INCREMENTAL_CHECKPOINTS, true);
        } else {
            flink.set(StateBackendOptions.STATE_BACKEND, "hashmap");
        }
        // a Kryo fallback is slow and breaks savepoint compatibility silently: fail instead
        flink.set(PipelineOptions.GENERIC_TYPES, false);
        // Chained operators pass events on without a deep copy (four per event otherwise; measured
        // ~5% less CPU per record, docs/benchmarks.md). Safe: the source creates new objects, no
        // operator keeps an event it has passed on, the Kafka sinks serialise an event when they get
        // it, and the PostgreSQL sink copies a row's values when it buffers the row. So even an
        // EventProcessor that changes an event after emitting it cannot corrupt an output.
        flink.set(PipelineOptions.OBJECT_REUSE, true);
        config.parallelism().ifPresent(p -> flink.set(CoreOptions.DEFAULT_PARALLELISM, p));
        flink.set(PipelineOptions.GLOBAL_JOB_PARAMETERS, config.toJobParameters().toMap());
        return flink;
    }
}
