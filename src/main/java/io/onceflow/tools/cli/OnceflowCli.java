package io.onceflow.tools.cli;

import io.onceflow.cli.CommandLineTool;
import io.onceflow.cli.ExitCode;
import io.onceflow.config.ConfigException;
import io.onceflow.job.OnceflowJob;
import io.onceflow.tools.audit.AuditCommand;
import io.onceflow.tools.effects.EffectsCommand;
import io.onceflow.tools.retention.RetentionCommand;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * {@code bin/onceflow <command> [arguments]}: the operator's commands behind one entry point, which
 * {@code bin/onceflow} runs with the project's whole classpath (Flink's included), so that they run
 * on a machine without a Flink installation. Each command is the job's main method with the flag
 * that selects it, or the main method of a tool (audit, retention, effects); starting the job
 * inside this JVM is the explicit {@code run}, and {@code run --jar JAR} starts a team's job jar
 * ({@link JobJar}), which {@code bin/onceflow} then puts before Flink's jars instead of onceflow's.
 */
public final class OnceflowCli {
    /** What {@code bin/onceflow help} prints. */
    static final String USAGE = """
            Usage: bin/onceflow <command> [--config FILE] [settings...]

            Commands (each takes the job's settings; bin/onceflow <command> --help lists them):
            %s
              local-services [--topic NAME]... [--sql FILE]...
                        Start a Kafka broker and a PostgreSQL on this machine for run, until Ctrl-C
                        (bin/onceflow only; bin/onceflow local-services --help).
              help      Print this help.

            The job itself is submitted to a Flink cluster: flink run <your job jar> [settings...].
            Exit status: 0 done; 1 the audit found missing or duplicated ids; 2 nothing done (invalid
            configuration, a service that cannot be used, an unknown command), one line per problem.
            """;

    /** The commands, in the order the help lists them. */
    enum Command {
        CHECK("check", "Check the configuration, Kafka and PostgreSQL; start nothing, create no table.") {
            @Override
            ExitCode execute(String[] args) throws Exception {
                return OnceflowJob.execute(withFlag(OnceflowJob.CHECK, args), Optional.empty());
            }
        },
        DDL("ddl", "Print the PostgreSQL tables' DDL; needs only postgres.url, postgres.user, the tables.") {
            @Override
            ExitCode execute(String[] args) throws Exception {
                return OnceflowJob.execute(withFlag(OnceflowJob.PRINT_POSTGRES_DDL, args), Optional.empty());
            }
        },
        AUDIT("audit", "Reconcile the input and output per id; --live for a running job (exit 1 on findings).") {
            @Override
            ExitCode execute(String[] args) {
                return AuditCommand.execute(args);
            }
        },
        RETENTION("retention", "Delete events and commit-log rows older than --keep, while the job runs.") {
            @Override
            ExitCode execute(String[] args) {
                return RetentionCommand.execute(args);
            }
        },
        EFFECTS("effects", "retry-failed | retry-rejected | skip --id ID...: re-drive failed (or rejected) effects, or skip them.") {
            @Override
            ExitCode execute(String[] args) {
                return EffectsCommand.execute(args);
            }
        },
        RUN("run", "Run the job inside this JVM on a local Flink (development; checks first); --jar JAR: your job jar.") {
            @Override
            ExitCode execute(String[] args) throws Exception {
                Optional<JobJar> jar = JobJar.named(args);
                String[] jobArgs = withFlag(OnceflowJob.RUN_LOCAL, JobJar.withoutOption(args));
                return jar.isPresent() ? jar.get().run(jobArgs) : OnceflowJob.execute(jobArgs, Optional.empty());
            }
        };

        private final String name;
        private final String summary;

        Command(String name, String summary) {
            this.name = name;
            this.summary = summary;
        }

        /** Runs the command with the arguments after its name. */
        abstract ExitCode execute(String[] args) throws Exception;

        static Optional<Command> named(String name) {
            return Stream.of(values()).filter(command -> command.name.equals(name)).findFirst();
        }
    }

    private OnceflowCli() {}

    /**
     * Runs the command {@code args[0]} names with the rest of {@code args}.
     *
     * @param args the command's name, then its arguments
     */
    public static void main(String[] args) throws Exception {
        CommandLineTool.run(OnceflowCli.class, () -> execute(args));
    }

    /**
     * Runs the command {@code args[0]} names, without ending the process.
     *
     * @return how the command ended
     * @throws ConfigException if the command is unknown or its configuration invalid
     * @throws io.onceflow.cli.CannotRunException if a service cannot be used
     */
    static ExitCode execute(String[] args) throws Exception {
        String name = args.length == 0 ? "help" : args[0];
        Optional<Command> command = Command.named(name);
        if (command.isPresent()) {
            return command.get().execute(Arrays.copyOfRange(args, 1, args.length));
        }
        if (List.of("help", "--help", "-h").contains(name)) {
            System.out.println(usage());
            return ExitCode.CLEAN;
        }
        // only a word is echoed: a first argument such as --postgres.password=... may hold a secret
        String given = name.matches("[a-z-]{1,20}") ? "'" + name + "'" : "the first argument";
        throw new ConfigException(List.of(ConfigException.problem("command", given + " is not one of "
                + Stream.of(Command.values()).map(known -> known.name).collect(Collectors.joining(", ")),
                "Name the command first, e.g. bin/onceflow check --config job.properties; bin/onceflow help"
                        + " says what each does.")));
    }

    static String usage() {
        return USAGE.formatted(Stream.of(Command.values())
                .map(command -> String.format("  %-9s %s", command.name, command.summary))
                .collect(Collectors.joining("\n")));
    }

    /** {@code args} after {@code --flag}. */
    static String[] withFlag(String flag, String[] args) {
        String[] withFlag = new String[args.length + 1];
        withFlag[0] = "--" + flag;
        System.arraycopy(args, 0, withFlag, 1, args.length);
        return withFlag;
    }
}
