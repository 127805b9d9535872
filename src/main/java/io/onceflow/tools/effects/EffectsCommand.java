package io.onceflow.tools.effects;

import io.onceflow.sink.postgres.internal.SqlStates;
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
 * {@code bin/onceflow effects (retry-failed | retry-rejected | skip) --config job.properties ...}:
 * what an operator does to the business effects of the job's PostgreSQL sink ({@link
 * EffectActions}): re-drive the failed ones once their cause is fixed, re-drive rejected ones by
 * name, or skip failed ones with a reason; each action is logged with its reason. Reads the job's
 * own settings, as every onceflow command, and connects as the sink does.
 */
public final class EffectsCommand {
    static final String RETRY_FAILED = "retry-failed";
    static final String RETRY_REJECTED = "retry-rejected";
    static final String SKIP = "skip";
    private static final List<String> SUBCOMMANDS = List.of(RETRY_FAILED, RETRY_REJECTED, SKIP);
    private static final String ID = "id";
    private static final String ALL = "all";
    private static final String REASON = "reason";

    /** What {@code --help} prints before the settings reference. */
    static final String COMMAND_USAGE = """
            Usage: bin/onceflow effects retry-failed [--config FILE] [settings...] (--id ID [--id ID]... | --all)
                       [--reason TEXT]
                   bin/onceflow effects retry-rejected [--config FILE] [settings...] --id ID [--id ID]... --reason TEXT
                   bin/onceflow effects skip [--config FILE] [settings...] --id ID [--id ID]... --reason TEXT
                   (or java -cp onceflow-<version>-job.jar:$FLINK_HOME/lib/* io.onceflow.tools.effects.EffectsCommand ...)

            An effect whose function raised an error about the message (result {"status":"failed",...})
            stays in the effect queue, marked failed, and the gauge effectsAwaitingRedrive counts it
            until you act:
              retry-failed    after you fixed the cause (the function, or the data it reads): in one
                              transaction its result goes back to pending and the mark is cleared; the
                              running job's effect workers then apply each exactly once.
              retry-rejected  a rejection is a business outcome, re-driven only by name: its result goes
                              back to pending and it is queued again, for the function to decide anew.
              skip            a failed effect that is not to be called: it leaves the queue, its result
                              becomes {"status":"skipped","reason":...,"skipped":<the failure>}.
            Each action is logged, with the reason, the result before and your role, in the table
            <postgres.table>_effect_log. A second run finds nothing to do. Run it with the job's own
            settings, postgres.effect.function included; safe while the job runs. docs/effects.md,
            "Failed effects", has the details.

              --help, -h
                  Print this help and exit; anywhere among the arguments.
              --id ID (repeatable)
                  The message id of an effect to act on.
              --all
                  retry-failed only: every effect of the sink recorded as failed.
              --reason TEXT
                  Why: kept in the effect log (and in a skipped effect's result). Required for
                  retry-rejected and skip.

            Exit status: 0 done (what was done, and why a given id was not, is printed); 2 nothing
            done: invalid arguments or configuration, an effect function that cannot be called, or
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
        if (args.length == 0 || !SUBCOMMANDS.contains(args[0])) {
            // only a word is echoed: the argument may be a setting that holds a secret
            String given = args.length == 0 ? "nothing"
                    : args[0].matches("[a-z-]{1,20}") ? "'" + args[0] + "'" : "another argument";
            throw new ConfigException(List.of(problem("effects", "needs its subcommand first (" + String.join(", ",
                    SUBCOMMANDS) + "), and got " + given, "Run bin/onceflow effects retry-failed --config job.properties"
                            + " --id ID (or --all); bin/onceflow effects --help says more.")));
        }
        String subcommand = args[0];
        ProgramArguments arguments = ProgramArguments.parse(Arrays.copyOfRange(args, 1, args.length), Set.of(ALL),
                Set.of(REASON), Set.of(ID));
        List<String> ids = arguments.values(ID);
        boolean all = arguments.flag(ALL);
        String reason = arguments.text(REASON).orElse(null);
        checkSelection(arguments, subcommand, ids, all, reason);
        OnceflowConfig config = arguments.config(System.getenv());
        PostgresSettings postgres = config.postgres().orElseThrow(() -> new ConfigException(List.of(
                problem("postgres.url", "is not set: the job has no PostgreSQL sink, so no effect",
                        "Run this command with the settings of the job whose effects you act on."))));
        if (postgres.effectFunction().isEmpty()) {
            throw new ConfigException(List.of(problem("postgres.effect.function", "is not set: effects queued again"
                            + " would wait for a job with an effect function, and a start without one is refused while"
                            + " effects are queued",
                    "Run this command with the settings of the job whose effects you act on, its"
                            + " postgres.effect.function included.")));
        }
        EffectActions actions = new EffectActions(postgres.connection(), postgres.tables(), postgres.writer(),
                postgres.sinkPrefix());
        try {
            EffectActions.Outcome outcome = switch (subcommand) {
                case RETRY_FAILED -> actions.retryFailed(all ? List.of() : ids, reason);
                case RETRY_REJECTED -> actions.retryRejected(ids, reason);
                default -> actions.skip(ids, reason);
            };
            System.out.print(outcome.toText(postgres.effectFunction().get()));
        } catch (IllegalStateException e) {
            throw cannotRun(config, "postgres.effect.function", "nothing was done: " + e.getMessage(),
                    "Fix the function, then run the command again.");
        } catch (SQLException e) {
            throw cannotRun(config, "postgres.url", "nothing was done: " + e.getMessage(), SqlStates.is(e, SqlStates.UNDEFINED_TABLE)
                    ? "Check postgres.table; a table created by an older version gets its effect queue and effect log"
                            + " when the job starts with this version."
                    : "Check that PostgreSQL is reachable and that the role may update " + postgres.table()
                            + ", its effect queue and its effect log (the job's own role may).");
        }
        return ExitCode.CLEAN;
    }

    /** Ids (or, for retry-failed only, --all instead) and a reason where one is required; reported with the configuration's problems. */
    private static void checkSelection(ProgramArguments arguments, String subcommand, List<String> ids, boolean all,
            String reason) {
        boolean allowsAll = RETRY_FAILED.equals(subcommand);
        if (all && !allowsAll) {
            arguments.optionProblem(problem("--" + ALL, "is not accepted by " + subcommand + ": it acts on effects"
                    + " named one by one", "Name each with --id ID (repeat it)."));
        } else if (ids.isEmpty() && !all) {
            arguments.optionProblem(problem("--" + ID, "is not given" + (allowsAll ? ", nor --" + ALL : "")
                    + ": nothing says which effects to act on", "Name each with --id ID (repeat it)"
                    + (allowsAll ? ", or give --all for every effect of the sink recorded as failed." : ".")));
        } else if (!ids.isEmpty() && all) {
            arguments.optionProblem(problem("--" + ALL, "is given with --" + ID,
                    "Give either the ids (--id ID, repeated) or --all, not both."));
        }
        if (ids.stream().anyMatch(String::isBlank)) {
            arguments.optionProblem(problem("--" + ID, "is empty", "Give a message id after each --id."));
        }
        if (!allowsAll && (reason == null || reason.isBlank())) {
            arguments.optionProblem(problem("--" + REASON, "is not given: " + subcommand + " changes a settled outcome"
                    + " and keeps why in the effect log", "Say why with --reason TEXT, e.g. --reason \"TICKET-123:"
                    + " limit raised\"."));
        }
    }

    private static CannotRunException cannotRun(OnceflowConfig config, String key, String whatIsWrong,
            String whatToDo) {
        return new CannotRunException(List.of(Preflight.withoutSecrets(Preflight.oneLine(
                problem(key, whatIsWrong, whatToDo)), config)));
    }
}
