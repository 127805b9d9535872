package io.onceflow.cli;

import io.onceflow.config.ConfigException;
import java.util.Set;
import org.apache.flink.annotation.Internal;

/**
 * Runs the main method of an onceflow command the same way for every command: a configuration
 * problem or an unusable service is printed as lines of {@code <key>: <what is wrong>. <what to
 * do>}, without a stack trace, and the process ends with the {@link ExitCode}.
 *
 * <p>The process is ended only when the command owns its JVM: started with {@code java}, or
 * through Flink's CLI ({@code flink run}). A job submitted over REST ({@code POST /jars/:id/run})
 * runs its main method inside the JobManager, whose JVM must live on: there the failure is thrown,
 * and Flink returns its message to the REST caller.
 */
@Internal
public final class CommandLineTool {
    /** The JVM main classes that launch a user's main method in a JVM of its own. */
    private static final Set<String> LAUNCHERS = Set.of("org.apache.flink.client.cli.CliFrontend");

    private CommandLineTool() {}

    /** The work of a command. */
    @FunctionalInterface
    public interface Command {
        /**
         * Does the work.
         *
         * @return how it ended
         * @throws ConfigException if the configuration is invalid
         * @throws CannotRunException if a service cannot be used
         */
        ExitCode run() throws Exception;
    }

    /**
     * Runs {@code command} and ends the process with its exit code when the command owns the JVM.
     *
     * @param mainClass the class whose main method calls this
     * @param command the work
     * @throws Exception what the command threw, when the JVM is not the command's own
     */
    public static void run(Class<?> mainClass, Command command) throws Exception {
        ExitCode exitCode;
        RuntimeException failure = null;
        try {
            exitCode = command.run();
        } catch (ConfigException | CannotRunException e) {
            exitCode = ExitCode.CANNOT_RUN;
            failure = e;
        }
        if (!ownsJvm(mainClass)) {
            if (failure != null) {
                throw failure;
            }
            return;
        }
        if (failure != null) {
            // both kinds of message are free of secrets and stack traces by construction
            System.err.println(failure.getMessage());
        }
        System.out.flush();
        System.err.flush();
        System.exit(exitCode.status());
    }

    /**
     * Tells whether this JVM was started for {@code mainClass}: {@code java [-cp ...] mainClass},
     * {@code java -jar job.jar} or Flink's CLI.
     */
    static boolean ownsJvm(Class<?> mainClass) {
        String command = System.getProperty("sun.java.command", "").strip();
        String launched = command.split("\\s+", 2)[0];
        return launched.equals(mainClass.getName()) || launched.endsWith(".jar") || LAUNCHERS.contains(launched);
    }
}
