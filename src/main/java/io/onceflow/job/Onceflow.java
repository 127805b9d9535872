package io.onceflow.job;

import io.onceflow.cli.CommandLineTool;
import io.onceflow.api.EventProcessor;
import io.onceflow.config.OnceflowConfig;
import java.util.Objects;
import java.util.Optional;
import org.apache.flink.configuration.Configuration;

/**
 * What a team's code calls to run onceflow with its own {@link EventProcessor}: in a main method
 * of its own ({@link #run}), or, for tests and tools, to define the whole job in an environment
 * of its choosing ({@link #job}).
 *
 * <pre>{@code
 * public static void main(String[] args) throws Exception {
 *     Onceflow.run(args, new PaymentProcessor());
 * }
 * }</pre>
 */
public final class Onceflow {
    private Onceflow() {}

    /**
     * Runs the job as {@code io.onceflow.job.OnceflowJob}'s main does, with {@code processor} as
     * its business logic: for a main method of your own, in a jar that holds onceflow and your
     * processor, so that the processor needs no {@code processor.class} setting (which must then not
     * be set: that is reported as a configuration problem).
     *
     * <p>Problems are reported, and the process ends, as for {@code OnceflowJob.main} when your
     * class is the JVM's main class or the job is started with {@code flink run}; see {@link
     * CommandLineTool}. Started outside Flink (plain {@code java}, an IDE) it checks, then starts
     * the job on a local Flink only when {@code args} hold {@code --run-local}.
     *
     * @param args the job's arguments, as for {@code OnceflowJob.main} ({@code --help} lists them)
     * @param processor the business logic; serialised into the job graph, like any Flink function
     */
    public static void run(String[] args, EventProcessor processor) throws Exception {
        Objects.requireNonNull(processor, "processor (call OnceflowJob.main to use processor.class)");
        // the caller's main class, so that the process ends as main's would when it owns the JVM
        Class<?> mainClass = StackWalker.getInstance(StackWalker.Option.RETAIN_CLASS_REFERENCE).getCallerClass();
        OnceflowJob.run(mainClass, args, Optional.of(processor));
    }

    /**
     * The whole job {@code config} describes with {@code processor} as its business logic: the
     * Kafka source, the sinks and the pipeline between them, to add to an environment with {@link
     * JobDefinition#defineIn}. Unlike {@link #run}, it checks no service before the sinks start.
     *
     * <pre>{@code
     * StreamExecutionEnvironment env =
     *         StreamExecutionEnvironment.getExecutionEnvironment(Onceflow.flinkConfiguration(config));
     * Onceflow.job(config, processor).defineIn(env);
     * env.execute(Onceflow.jobName(config));
     * }</pre>
     *
     * @param config the validated configuration
     * @param processor the business logic; serialised into the job graph, like any Flink function
     * @return the definition, to be bounded or given other sinks before {@code defineIn}
     */
    public static JobDefinition job(OnceflowConfig config, EventProcessor processor) {
        return new JobDefinition(config, processor);
    }

    /**
     * The Flink settings the configuration implies, for the job's execution environment:
     * exactly-once checkpoints (the sinks' transactions commit on them), retained on cancellation,
     * the state backend, no Kryo fallback, object reuse, and the redacted configuration as the job
     * parameters Flink's web UI shows.
     *
     * @param config the validated configuration
     * @return a new Flink configuration, which the caller may add to
     */
    public static Configuration flinkConfiguration(OnceflowConfig config) {
        return FlinkSettings.configuration(config);
    }

    /**
     * The job name shown in Flink's UI, as {@code OnceflowJob.main} names the job.
     *
     * @param config the validated configuration
     * @return a name naming the input and output topics, never a secret
     */
    public static String jobName(OnceflowConfig config) {
        return FlinkSettings.jobName(config);
    }
}
