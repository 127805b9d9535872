package io.onceflow.config;

import static io.onceflow.config.ConfigKey.POSTGRES_PASSWORD;
import static io.onceflow.config.ConfigKey.POSTGRES_URL;
import static io.onceflow.config.ConfigKey.PROCESSOR_CLASS;

import io.onceflow.sink.postgres.options.PostgresTableOptions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.function.Function;

/**
 * The arguments of an onceflow command: its own flags (e.g. {@code --print-postgres-ddl}) and
 * options (e.g. the audit's {@code --format json}), and the job configuration, all in {@code --key
 * value} or {@code --key=value} form. Problems with the command's options are reported together
 * with the configuration's, in one {@link ConfigException}.
 */
public final class ProgramArguments {
    private final CommandLine commandLine;
    private final List<String> optionProblems = new ArrayList<>();

    private ProgramArguments(CommandLine commandLine) {
        this.commandLine = commandLine;
    }

    /**
     * Splits {@code args} into the command's flags and options and the job's settings.
     *
     * @param flags the command's flags, without {@code --}
     * @param options the command's options that take a value, without {@code --}
     * @return the parsed arguments; problems are reported by {@link #config} or {@link
     *     #postgresTables}
     */
    public static ProgramArguments parse(String[] args, Set<String> flags, Set<String> options) {
        return parse(args, flags, options, Set.of());
    }

    /**
     * As {@link #parse(String[], Set, Set)}, with options that may be given more than once.
     *
     * @param repeatable the command's options that take a value and may be repeated, without {@code --}
     * @return the parsed arguments; {@link #values} returns a repeatable option's values
     */
    public static ProgramArguments parse(String[] args, Set<String> flags, Set<String> options, Set<String> repeatable) {
        return new ProgramArguments(CommandLine.parse(args, flags, options, repeatable));
    }

    /**
     * Tells whether {@code --help} or {@code -h} is anywhere in {@code args}, whatever else they
     * hold: the help is printed even when the rest could not be parsed.
     *
     * @param args the command's arguments
     * @return true to print the help and exit
     */
    public static boolean helpRequested(String[] args) {
        return List.of(args).stream().anyMatch(CommandLine.HELP_ARGUMENTS::contains);
    }

    /**
     * Tells whether the flag was given.
     *
     * @param name without {@code --}
     * @return true if given
     */
    public boolean flag(String name) {
        return commandLine.flags().contains(name);
    }

    /**
     * Returns the values of a repeatable option, in the order given.
     *
     * @param name the option without {@code --}, one of the {@code repeatable} names given to {@link
     *     #parse(String[], Set, Set, Set)}
     * @return its values; empty if not given
     */
    public List<String> values(String name) {
        return commandLine.repeatedOptions().getOrDefault(name, List.of());
    }

    /**
     * Reports a problem with the command's own options together with the configuration's: {@link
     * #config} throws it with them.
     *
     * @param problem one line, {@link ConfigException#problem}
     */
    public void optionProblem(String problem) {
        optionProblems.add(problem);
    }

    /**
     * Returns one of the values {@code choices} of an option; reports any other value.
     *
     * @param name the option without {@code --}
     * @param choices the allowed values; the first is the default
     * @return the value, or the default if not given or invalid
     */
    public String choice(String name, List<String> choices) {
        String value = commandLine.commandOptions().get(name);
        if (value == null) {
            return choices.get(0);
        }
        if (!choices.contains(value)) {
            String allowed = String.join(", ", choices);
            optionProblems.add(ConfigException.problem(
                    "--" + name, "is not one of " + allowed, "Use one of " + allowed + "."));
            return choices.get(0);
        }
        return value;
    }

    /**
     * Returns a duration option, written as the job's durations are ({@code 30s}, {@code 10min},
     * {@code PT2M}); reports an invalid one.
     *
     * @param name the option without {@code --}
     * @param defaultValue returned when the option is not given or invalid
     * @return a positive duration
     */
    public Duration duration(String name, Duration defaultValue) {
        String value = commandLine.commandOptions().get(name);
        if (value == null) {
            return defaultValue;
        }
        try {
            return ValueParsers.durationAtLeast(Duration.ofMillis(1)).apply(value.trim());
        } catch (InvalidValueException e) {
            optionProblems.add(ConfigException.problem("--" + name, e.whatIsWrong(), e.whatToDo()));
            return defaultValue;
        }
    }

    /**
     * Returns the value of an option, as given.
     *
     * @param name the option without {@code --}
     * @return its value; empty if not given
     */
    public Optional<String> text(String name) {
        return Optional.ofNullable(commandLine.commandOptions().get(name));
    }

    /**
     * Shows a duration the way options and settings are written, e.g. {@code 7d}, for messages.
     *
     * @param duration any duration
     * @return e.g. {@code 15min}
     */
    public static String formatDuration(Duration duration) {
        return ValueParsers.format(duration);
    }

    /**
     * Reads and validates the job configuration.
     *
     * @param environment for {@code ${VAR}} substitution, usually {@link System#getenv()}
     * @return the configuration
     * @throws ConfigException listing every problem, the command's options' included
     */
    public OnceflowConfig config(Map<String, String> environment) {
        return new OnceflowConfig(reader(environment));
    }

    /**
     * Reads and validates the configuration of the job itself: as {@link #config}, and also checks
     * the class {@code processor.class} names with the job's {@code processorClassCheck} (the
     * configuration keeps only the name: loading classes is the job's business), so that a problem
     * with it is reported with the others.
     *
     * @param environment for {@code ${VAR}} substitution, usually {@link System#getenv()}
     * @param processorClassCheck checks a class name; throws {@link InvalidValueException} saying
     *     what is wrong and what to do
     * @param processorGiven whether the job was given its processor in code, which {@code
     *     processor.class} must then not contradict
     * @return the configuration
     * @throws ConfigException listing every problem, the command's options' included
     */
    public OnceflowConfig jobConfig(
            Map<String, String> environment, Function<String, ?> processorClassCheck, boolean processorGiven) {
        ConfigReader settings = reader(environment);
        if (processorGiven && settings.isSet(PROCESSOR_CLASS)) {
            settings.problem(
                    PROCESSOR_CLASS,
                    "is set, but the job was started with a processor of its own (Onceflow.run(args,"
                            + " processor))",
                    "Remove processor.class from the settings, or start the job with OnceflowJob.main so"
                            + " that it applies.");
        } else {
            settings.parsed(PROCESSOR_CLASS, processorClassCheck);
        }
        return new OnceflowConfig(settings);
    }

    /**
     * Reads only the settings that name the PostgreSQL tables, for commands that need nothing else
     * (the DDL): {@code postgres.url}, {@code postgres.user} and the {@code postgres.*table} keys;
     * neither the password nor {@code postgres.sink.prefix} is required.
     *
     * @param environment for {@code ${VAR}} substitution
     * @return the tables
     * @throws ConfigException listing every problem, including a missing {@code postgres.url}
     */
    public PostgresTableOptions postgresTables(Map<String, String> environment) {
        // The DDL connects to nothing: a password (often ${VAR} of a variable set only where the job
        // runs) must not be required.
        Map<String, String> withoutPassword = new HashMap<>(commandLine.settings());
        withoutPassword.remove(POSTGRES_PASSWORD.key());
        ConfigReader settings = reader(withoutPassword, environment);
        if (!settings.isSet(POSTGRES_URL)) {
            settings.problem(POSTGRES_URL, "is required here but not set", "Set it: " + POSTGRES_URL.description());
        }
        PostgresTableOptions tables = PostgresSettings.readTables(settings);
        settings.throwIfAnyProblem();
        return tables;
    }

    private ConfigReader reader(Map<String, String> environment) {
        return reader(commandLine.settings(), environment);
    }

    private ConfigReader reader(Map<String, String> settings, Map<String, String> environment) {
        List<String> earlierProblems = new ArrayList<>(commandLine.problems());
        earlierProblems.addAll(optionProblems);
        return new ConfigReader(settings, ValueSubstitution.of(environment), earlierProblems);
    }
}
