package io.onceflow.job;

import io.onceflow.api.EventProcessor;
import io.onceflow.cli.CannotRunException;
import io.onceflow.cli.CommandLineTool;
import io.onceflow.cli.ExitCode;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.config.ProgramArguments;
import io.onceflow.preflight.Preflight;
import java.sql.SQLException;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import org.apache.flink.annotation.Internal;
import org.apache.flink.streaming.api.environment.LocalStreamEnvironment;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The entry point users submit: reads the configuration, checks it and the services it names
 * ({@link Preflight}) before anything starts, and wires it to the pipeline ({@link
 * JobDefinition}). Exits with status 2 and every problem listed, one line each, when the
 * configuration is invalid or a service cannot be used.
 */
public final class OnceflowJob {
    private OnceflowJob() {}

    /** The flag that prints the DDL of the configured tables instead of running the job, for DBAs who create them by hand. */
    public static final String PRINT_POSTGRES_DDL = "print-postgres-ddl";
    /** The flag that checks the configuration and the services it names, and starts nothing. */
    public static final String CHECK = "check";
    /**
     * The flag that runs the job inside this JVM, on a local Flink; without it a main method started
     * outside Flink (plain {@code java}, an IDE) refuses instead of starting the job.
     */
    public static final String RUN_LOCAL = "run-local";

    private static final Logger LOG = LoggerFactory.getLogger(OnceflowJob.class);

    /** What {@code --help} prints before the settings reference. */
    static final String COMMAND_USAGE = """
            Usage: flink run [-d] [-s SAVEPOINT] onceflow-<version>-job.jar [--config FILE] [settings...]
                   bin/onceflow check|ddl|run|audit [--config FILE] [settings...]   (docs/configuration.md)

              --help, -h
                  Print this help and exit; anywhere among the arguments.
              --check
                  Check the configuration and the services it names (below), then exit: nothing is
                  started, no run registered, no table created.
              --print-postgres-ddl
                  Print the CREATE TABLE statements of the PostgreSQL tables instead of running the job;
                  needs only postgres.url, postgres.user and the table settings.
              --run-local
                  Run the job inside this JVM on a local Flink (development). Without it, a main method
                  started outside Flink (java, an IDE) refuses to start the job; flink run and Flink's
                  application mode need no flag.

            Before the job graph is built, the Kafka brokers, the topics, the brokers' transaction
            settings and PostgreSQL are checked, about 10 s at most each.
            Exit status: 0 job submitted (or help, DDL or a passed check printed); 2 nothing done:
            invalid configuration, a service that cannot be used, or no --run-local outside Flink,
            one line per problem.

            """;

    /**
     * Runs the job as configured by {@code args} ({@code --help} lists them), with the processor
     * {@code processor.class} names; see {@link CommandLineTool} for how problems are reported and
     * the process ends.
     */
    public static void main(String[] args) throws Exception {
        run(OnceflowJob.class, args, Optional.empty());
    }

    /**
     * Runs the job as {@link #main} does, with {@code processor} as its business logic when given
     * (then {@code processor.class} must not be set): what {@link io.onceflow.job.Onceflow#run}
     * does for a main method of the user's own.
     *
     * @param mainClass the class whose main method runs the job: the process ends as its main's
     *     would when it owns the JVM (see {@link CommandLineTool})
     */
    @Internal
    public static void run(Class<?> mainClass, String[] args, Optional<EventProcessor> processor) throws Exception {
        CommandLineTool.run(mainClass, () -> execute(mainClass, args, processor));
    }

    /**
     * Does what {@link #run} does, without ending the process: for a command-line tool that
     * dispatches to the job's commands.
     *
     * @return how it ended
     * @throws io.onceflow.config.ConfigException if the configuration is invalid
     * @throws CannotRunException if a service cannot be used, or the job may not start here
     */
    @Internal
    public static ExitCode execute(String[] args, Optional<EventProcessor> givenProcessor) throws Exception {
        return execute(OnceflowJob.class, args, givenProcessor);
    }

    /** As {@link #execute(String[], Optional)}, for a job whose main method is {@code mainClass}'s. */
    private static ExitCode execute(Class<?> mainClass, String[] args, Optional<EventProcessor> givenProcessor)
            throws Exception {
        if (ProgramArguments.helpRequested(args)) {
            System.out.println(COMMAND_USAGE + OnceflowConfig.usage());
            return ExitCode.CLEAN;
        }
        ProgramArguments arguments = ProgramArguments.parse(args, Set.of(PRINT_POSTGRES_DDL, CHECK, RUN_LOCAL), Set.of());
        if (arguments.flag(PRINT_POSTGRES_DDL)) {
            System.out.print(JobSinks.postgresSchema(arguments.postgresTables(System.getenv())).ddl());
            return ExitCode.CLEAN;
        }
        OnceflowConfig config = arguments.jobConfig(System.getenv(),
                ProcessorClass.implementationOf(EventProcessor.class), givenProcessor.isPresent());
        EventProcessor processor = givenProcessor.or(() -> ProcessorClass.newInstance(config, EventProcessor.class))
                .orElseGet(EventProcessor::passThrough);
        parallelismOverrideWarning(config, flinksParallelism())
                .ifPresent(warning -> {
                    LOG.warn(warning);
                    System.err.println("onceflow: warning: " + warning);
                });
        long checkStarted = System.nanoTime();
        Preflight.Result checked = Preflight.check(config, Preflight.Purpose.RUN_JOB);
        if (arguments.flag(CHECK)) {
            checked.notes().forEach(note -> System.out.println("onceflow: " + note + "."));
            System.out.println("onceflow: the configuration is valid and Kafka" + (config.postgres().isPresent()
                    ? " and PostgreSQL are" : " is") + " usable (checked in " + Preflight.secondsSince(checkStarted)
                    + "); nothing was started.");
            return ExitCode.CLEAN;
        }
        localStartRefusal(startedByFlink(), arguments.flag(RUN_LOCAL)).ifPresent(refusal -> {
            throw new CannotRunException(List.of(refusal));
        });
        StreamExecutionEnvironment env =
                StreamExecutionEnvironment.getExecutionEnvironment(FlinkSettings.configuration(config));
        // fail before submitting, with a message that says what to fix, rather than in a restart loop
        OnceflowPipeline.Sinks sinks;
        try {
            sinks = JobStart.start(config, env, ResumeCommand.of(mainClass, args, config),
                    checked.kafkaTransactionTimeout());
        } catch (JobStart.FreshStartRefused e) {
            throw new CannotRunException(List.of(Preflight.withoutSecrets(
                    "fresh.start.pending: " + Preflight.oneLine(e.getMessage()), config)));
        } catch (SQLException | IllegalStateException e) {
            throw Preflight.postgresFailure(config, e);
        }
        new JobDefinition(config, processor).defineIn(env, sinks);
        env.execute(FlinkSettings.jobName(config));
        return ExitCode.CLEAN;
    }

    /**
     * Tells whether Flink started this main method: {@code flink run}, a REST submission or
     * application mode give it a context environment; plain {@code java} or an IDE a local one.
     */
    private static boolean startedByFlink() {
        return !(StreamExecutionEnvironment.getExecutionEnvironment() instanceof LocalStreamEnvironment);
    }

    /**
     * Refuses to start the job in this JVM unless asked to: outside Flink, {@code env.execute}
     * starts a local Flink that registers a run and creates the tables, which a forgotten flag
     * (say, a check meant as {@code --check}) must not do.
     *
     * @param startedByFlink whether Flink runs this main method
     * @param runLocalGiven whether {@code --run-local} was given
     * @return the problem line to report, or empty to start the job
     */
    static Optional<String> localStartRefusal(boolean startedByFlink, boolean runLocalGiven) {
        if (startedByFlink || runLocalGiven) {
            return Optional.empty();
        }
        return Optional.of("run-local: not given, and this main method was started outside Flink, so the job was"
                + " not started (the configuration and the services passed the check). Submit it with"
                + " flink run onceflow-<version>-job.jar <the same arguments>, or pass --run-local"
                + " (bin/onceflow run) to run it inside this JVM on a local Flink.");
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
}
