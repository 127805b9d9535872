package io.onceflow.job;

import io.onceflow.api.Event;
import io.onceflow.api.EventProcessor;
import io.onceflow.cli.CannotRunException;
import io.onceflow.cli.CommandLineTool;
import io.onceflow.cli.ExitCode;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.config.PostgresSettings;
import io.onceflow.config.ProgramArguments;
import io.onceflow.config.StateBackendKind;
import io.onceflow.ingest.IngestDeserializer;
import io.onceflow.ingest.IngestResult;
import io.onceflow.ingest.KafkaInput;
import io.onceflow.ingest.MessageIdSource;
import io.onceflow.preflight.Preflight;
import io.onceflow.sink.kafka.KafkaSinks;
import io.onceflow.sink.postgres.PostgresSink;
import io.onceflow.sink.postgres.PostgresSinkBuilder;
import io.onceflow.sink.postgres.internal.schema.PostgresSchema;
import java.sql.SQLException;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
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
import org.apache.flink.state.rocksdb.RocksDBNativeMetricOptions;
import org.apache.flink.streaming.api.environment.LocalStreamEnvironment;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.kafka.clients.consumer.OffsetResetStrategy;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The entry point users submit: reads the configuration, checks it and the services it names
 * ({@link Preflight}) before anything starts, and wires it to {@link OnceflowPipeline}. Exits with
 * status 2 and every problem listed, one line each, when the configuration is invalid or a service
 * cannot be used.
 */
public final class OnceflowJob {
    private OnceflowJob() {}

    /** The flag that prints the DDL of the configured tables instead of running the job, for DBAs who create them by hand. */
    static final String PRINT_POSTGRES_DDL = "print-postgres-ddl";

    private static final Logger LOG = LoggerFactory.getLogger(OnceflowJob.class);

    /** What {@code --help} prints before the settings reference. */
    static final String COMMAND_USAGE = """
            Usage: flink run [-d] [-s SAVEPOINT] onceflow-<version>-job.jar [--config FILE] [settings...]
                   java -cp onceflow-<version>-job.jar:$FLINK_HOME/lib/* io.onceflow.job.OnceflowJob \\
                       --print-postgres-ddl [--config FILE] [postgres.* settings...]

              --help, -h
                  Print this help and exit; anywhere among the arguments.
              --print-postgres-ddl
                  Print the CREATE TABLE statements of the PostgreSQL tables instead of running the job;
                  needs only postgres.url, postgres.user and the table settings.

            Before the job graph is built, the Kafka brokers, the topics, the brokers' transaction
            settings and PostgreSQL are checked, about 10 s at most each.
            Exit status: 0 job submitted (or help or DDL printed); 2 nothing done: invalid
            configuration or a service that cannot be used, one line per problem.

            """;

    /**
     * Runs the job as configured by {@code args} ({@code --help} lists them), with the processor
     * {@code processor.class} names; see {@link CommandLineTool} for how problems are reported and
     * the process ends.
     */
    public static void main(String[] args) throws Exception {
        CommandLineTool.run(OnceflowJob.class, () -> run(args, Optional.empty()));
    }

    /**
     * Runs the job as {@link #main} does, with {@code processor} as its business logic: for a main
     * method of your own, in a jar that holds onceflow and your processor, so that the processor
     * needs no {@code processor.class} setting (which must then not be set: that is reported as a
     * configuration problem).
     *
     * <pre>{@code
     * public static void main(String[] args) throws Exception {
     *     OnceflowJob.run(args, new PaymentProcessor());
     * }
     * }</pre>
     *
     * <p>Problems are reported, and the process ends, as for {@code main} when your class is the
     * JVM's main class or the job is started with {@code flink run}; see {@link CommandLineTool}.
     *
     * @param args the job's arguments, as for {@code main}
     * @param processor the business logic; serialised into the job graph, like any Flink function
     */
    public static void run(String[] args, EventProcessor processor) throws Exception {
        Objects.requireNonNull(processor, "processor (call main to use processor.class)");
        // the caller's main class, so that the process ends as main's would when it owns the JVM
        Class<?> mainClass = StackWalker.getInstance(StackWalker.Option.RETAIN_CLASS_REFERENCE).getCallerClass();
        CommandLineTool.run(mainClass, () -> run(args, Optional.of(processor)));
    }

    private static ExitCode run(String[] args, Optional<EventProcessor> givenProcessor) throws Exception {
        if (ProgramArguments.helpRequested(args)) {
            System.out.println(COMMAND_USAGE + OnceflowConfig.usage());
            return ExitCode.CLEAN;
        }
        ProgramArguments arguments = ProgramArguments.parse(args, Set.of(PRINT_POSTGRES_DDL), Set.of());
        if (arguments.flag(PRINT_POSTGRES_DDL)) {
            System.out.print(schema(arguments.postgresSettings(System.getenv())).ddl());
            return ExitCode.CLEAN;
        }
        OnceflowConfig config = arguments.jobConfig(System.getenv(), EventProcessor.class, givenProcessor.isPresent());
        EventProcessor processor = givenProcessor.or(() -> config.newProcessor(EventProcessor.class))
                .orElseGet(EventProcessor::passThrough);
        parallelismOverrideWarning(config, flinksParallelism())
                .ifPresent(warning -> {
                    LOG.warn(warning);
                    System.err.println("onceflow: warning: " + warning);
                });
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(flinkConfiguration(config));
        Preflight.check(config, Preflight.Purpose.RUN_JOB);
        // fail before submitting, with a message that says what to fix, rather than in a restart loop
        OnceflowPipeline.Sinks sinks;
        try {
            sinks = startSinks(env, config);
        } catch (SinkStart.FreshStartRefused e) {
            throw new CannotRunException(List.of(Preflight.withoutSecrets(
                    "fresh.start.pending: " + Preflight.oneLine(e.getMessage()), config)));
        } catch (SQLException | IllegalStateException e) {
            throw Preflight.postgresFailure(config, e);
        }
        defineJob(env, config, sinks, processor);
        env.execute(jobName(config));
        return ExitCode.CLEAN;
    }

    /**
     * The parallelism Flink gave the job's environment (the CLI's {@code -p}, the REST request's, or
     * {@code parallelism.default}); -1 when there is none: a local environment (plain {@code java})
     * defaults to the number of cores, which nobody chose.
     */
    private static int flinksParallelism() {
        StreamExecutionEnvironment flinks = StreamExecutionEnvironment.getExecutionEnvironment();
        return flinks instanceof LocalStreamEnvironment ? -1 : flinks.getParallelism();
    }

    /**
     * Says so when the job's {@code parallelism} setting overrides the parallelism Flink was given
     * ({@code flink run -p}, the REST run request's parallelism, or {@code parallelism.default}):
     * the job's setting wins, which a user of {@code -p} would not expect.
     *
     * @param flinkParallelism the parallelism of Flink's execution environment before the job's
     *     settings apply; not positive when Flink was given none
     * @return the warning, or empty when nothing is overridden
     */
    static Optional<String> parallelismOverrideWarning(OnceflowConfig config, int flinkParallelism) {
        if (config.parallelism().isEmpty() || flinkParallelism <= 0
                || config.parallelism().getAsInt() == flinkParallelism) {
            return Optional.empty();
        }
        return Optional.of("the job runs with parallelism " + config.parallelism().getAsInt()
                + " from its setting 'parallelism', not with Flink's " + flinkParallelism
                + " (flink run -p, the REST request's parallelism or parallelism.default). Remove 'parallelism'"
                + " from the job's settings to let Flink's apply.");
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
        OnceflowPipeline.define(env, kafkaSourceBuilder(config).build(), sinks, config.dedupTtl(), processor,
                config.processorRetries());
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
                .setConnection(settings.connection())
                .setTables(settings.tables())
                .setWriterOptions(settings.writer())
                .setSinkPrefix(settings.sinkPrefix())
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
            // RocksDB's estimate of the keys in each state: for dedup, the ids it tracks (what the
            // "ids in dedup state" panel and docs/operations.md show), at the cost of one property read
            // per column family and reporter interval. The state's name is a label, not part of the name.
            flink.set(RocksDBNativeMetricOptions.ESTIMATE_NUM_KEYS, true);
            flink.set(RocksDBNativeMetricOptions.COLUMN_FAMILY_AS_VARIABLE, true);
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
