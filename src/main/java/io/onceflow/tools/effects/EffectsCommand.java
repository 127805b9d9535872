package io.onceflow.tools.effects;

import static io.onceflow.config.ConfigException.problem;

import io.onceflow.cli.CannotRunException;
import io.onceflow.cli.CommandLineTool;
import io.onceflow.cli.ExitCode;
import io.onceflow.config.ConfigException;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.config.PostgresSettings;
import io.onceflow.config.ProgramArguments;
import io.onceflow.preflight.Preflight;
import java.sql.SQLException;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import org.apache.flink.annotation.Internal;

/**
 * {@code bin/onceflow effects retry-failed --config job.properties (--id ID [--id ID]... | --all)}:
 * queues again the business effects that the job's PostgreSQL sink recorded as failed, once their
 * cause is fixed ({@link FailedEffects}); the running job's effect workers apply each exactly once.
 * Reads the job's own settings, as every onceflow command, and connects as the sink does.
 */
public final class EffectsCommand {
    /** The only subcommand. */
    static final String RETRY_FAILED = "retry-failed";
    private static final String ID = "id";
    private static final String ALL = "all";

    /** What {@code --help} prints before the settings reference. */
    static final String COMMAND_USAGE = """
            Usage: bin/onceflow effects retry-failed [--config FILE] [settings...] (--id ID [--id ID]... | --all)
                   java -cp onceflow-<version>-job.jar:$FLINK_HOME/lib/* io.onceflow.tools.effects.EffectsCommand \\
                       retry-failed [--config FILE] [settings...] (--id ID [--id ID]... | --all)

            Queues again the business effects that the PostgreSQL sink recorded as failed (result
            {"status":"failed",...}: the effect function raised an error about the message), after
            you fixed the cause (the function, or the data it reads). In one transaction their
            result goes back to pending and they join the effect queue; the running job's effect
            workers then apply each exactly once. Effects applied or rejected are never queued
            again, and a second run finds nothing to queue. Run it with the job's own settings,
            postgres.effect.function included; safe while the job runs. docs/effects.md,
            "Re-driving failed effects", has the details.

              --help, -h
                  Print this help and exit; anywhere among the arguments.
              --id ID (repeatable)
                  The message id of a failed effect to queue again.
              --all
                  Queue again every effect of postgres.table recorded as failed.

            Exit status: 0 done (what was queued, and why a given id was not, is printed); 2 nothing
            queued: invalid arguments or configuration, an effect function that cannot be called, or
            a database that cannot be used, one line per problem.

            """;

    private EffectsCommand() {}

    public static void main(String[] args) throws Exception {
        CommandLineTool.run(EffectsCommand.class, () -> execute(args));
    }

    /**
     * Runs the subcommand {@code args[0]} names, as {@link #main} does, without ending the process:
     * for the command-line tool that dispatches to it.
     *
     * @param args the subcommand, then its arguments
     * @return how it ended
     * @throws ConfigException if the arguments or the configuration are invalid
     * @throws CannotRunException if the database or the effect function cannot be used
     */
    @Internal
    public static ExitCode execute(String[] args) {
        if (ProgramArguments.helpRequested(args)) {
            System.out.println(COMMAND_USAGE + OnceflowConfig.usage());
            return ExitCode.CLEAN;
        }
        if (args.length == 0 || !RETRY_FAILED.equals(args[0])) {
            // only a word is echoed: the argument may be a setting that holds a secret
            String given = args.length == 0 ? "nothing"
                    : args[0].matches("[a-z-]{1,20}") ? "'" + args[0] + "'" : "another argument";
            throw new ConfigException(List.of(problem("effects", "needs its subcommand " + RETRY_FAILED + " first, and got "
                    + given, "Run bin/onceflow effects retry-failed --config job.properties --id ID (or --all);"
                            + " bin/onceflow effects --help says more.")));
        }
        ProgramArguments arguments = ProgramArguments.parse(Arrays.copyOfRange(args, 1, args.length), Set.of(ALL),
                Set.of(), Set.of(ID));
        List<String> ids = arguments.values(ID);
        boolean all = arguments.flag(ALL);
        checkSelection(arguments, ids, all);
        OnceflowConfig config = arguments.config(System.getenv());
        PostgresSettings postgres = config.postgres().orElseThrow(() -> new ConfigException(List.of(
                problem("postgres.url", "is not set: the job has no PostgreSQL sink, so no effect",
                        "Run this command with the settings of the job whose effects failed."))));
        if (postgres.effectFunction().isEmpty()) {
            throw new ConfigException(List.of(problem("postgres.effect.function", "is not set: effects queued again"
                            + " would wait for a job with an effect function, and a start without one is refused while"
                            + " effects are queued",
                    "Run this command with the settings of the job whose effects failed, its"
                            + " postgres.effect.function included.")));
        }
        FailedEffects failed = new FailedEffects(postgres.connection(), postgres.tables(), postgres.writer(),
                postgres.sinkPrefix());
        try {
            System.out.print(failed.requeue(all ? List.of() : ids).toText(postgres.effectFunction().get()));
        } catch (IllegalStateException e) {
            throw cannotRun(config, "postgres.effect.function", "nothing was queued: " + e.getMessage(),
                    "Fix the function, then run the command again.");
        } catch (SQLException e) {
            throw cannotRun(config, "postgres.url", "nothing was queued: " + e.getMessage(), "42P01".equals(e.getSQLState())
                    ? "Check postgres.table; a table created by an older version gets its effect queue when the job"
                            + " starts with this version."
                    : "Check that PostgreSQL is reachable and that the role may update " + postgres.table()
                            + " and insert into its effect queue (the job's own role may).");
        }
        return ExitCode.CLEAN;
    }

    /** Exactly one of: ids, or --all. Reported with the configuration's problems. */
    private static void checkSelection(ProgramArguments arguments, List<String> ids, boolean all) {
        if (ids.isEmpty() && !all) {
            arguments.optionProblem(problem("--" + ID, "is not given, nor --" + ALL + ": nothing says which failed"
                    + " effects to queue again", "Name each with --id ID (repeat it), or give --all for every effect"
                    + " of postgres.table recorded as failed."));
        } else if (!ids.isEmpty() && all) {
            arguments.optionProblem(problem("--" + ALL, "is given with --" + ID,
                    "Give either the ids (--id ID, repeated) or --all, not both."));
        }
        if (ids.stream().anyMatch(String::isBlank)) {
            arguments.optionProblem(problem("--" + ID, "is empty", "Give a message id after each --id."));
        }
    }

    private static CannotRunException cannotRun(OnceflowConfig config, String key, String whatIsWrong,
            String whatToDo) {
        return new CannotRunException(List.of(Preflight.withoutSecrets(Preflight.oneLine(
                problem(key, whatIsWrong, whatToDo)), config)));
    }
}
