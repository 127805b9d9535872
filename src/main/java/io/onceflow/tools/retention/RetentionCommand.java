package io.onceflow.tools.retention;

import io.onceflow.cli.CannotRunException;
import io.onceflow.cli.CommandLineTool;
import io.onceflow.cli.ExitCode;
import io.onceflow.config.ConfigException;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.config.PostgresSettings;
import io.onceflow.config.ProgramArguments;
import io.onceflow.preflight.Preflight;
import org.apache.flink.annotation.Internal;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * {@code bin/onceflow retention --config job.properties --keep 14d} (or {@code java -cp
 * onceflow-job.jar:$FLINK_HOME/lib/* io.onceflow.tools.retention.RetentionCommand ...}): deletes the rows of the job's events table and commit log
 * older than the window ({@link Retention}), while the job runs, and prints what it deleted. Run it
 * from cron (or a Kubernetes CronJob) with the job's own settings.
 */
public final class RetentionCommand {
    private static final String KEEP = Retention.KEEP_OPTION.substring(2);
    /** Rows per transaction: short row locks and a small WAL burst each, beside the running job. */
    static final int BATCH_SIZE = 1000;

    static final String COMMAND_USAGE = """
            Usage: bin/onceflow retention [--config FILE] [settings...] --keep DURATION
                   java -cp onceflow-<version>-job.jar:$FLINK_HOME/lib/* io.onceflow.tools.retention.RetentionCommand \\
                       [--config FILE] [settings...] --keep DURATION

            Deletes, in batches of 1000 rows, the rows of the PostgreSQL events table first processed
            longer ago than --keep (never one whose effect is still to be called) and the commit-log
            rows of postgres.sink.prefix logged longer ago than --keep. Safe while the job runs.
            docs/retention.md says how to choose the window.

              --help, -h
                  Print this help and exit; anywhere among the arguments.
              --keep DURATION (required)
                  At least dedup.ttl, the longest time after which a message may be delivered again,
                  and the age of the oldest checkpoint or savepoint you may restore, e.g. 14d.

            Exit status: 0 done; 2 nothing deleted: invalid configuration, a window shorter than
            dedup.ttl, or a database that cannot be used, one line per problem.

            """;

    private RetentionCommand() {}

    public static void main(String[] args) throws Exception {
        CommandLineTool.run(RetentionCommand.class, () -> execute(args));
    }

    /**
     * Purges as {@link #main} does, without ending the process: for the command-line tool that
     * dispatches to it ({@code bin/onceflow retention}).
     *
     * @return how it ended
     * @throws ConfigException if the configuration or the window is invalid
     * @throws CannotRunException if the database cannot be used
     */
    @Internal
    public static ExitCode execute(String[] args) {
        if (ProgramArguments.helpRequested(args)) {
            System.out.println(COMMAND_USAGE + OnceflowConfig.usage());
            return ExitCode.CLEAN;
        }
        ProgramArguments arguments = ProgramArguments.parse(args, Set.of(), Set.of(KEEP));
        Duration keep = arguments.duration(KEEP, null);
        OnceflowConfig config = configWithKeep(arguments, keep == null);
        PostgresSettings postgres = config.postgres().orElseThrow(() -> new ConfigException(List.of(
                ConfigException.problem("postgres.url", "is not set: there is no PostgreSQL table to purge",
                        "Run this command with the settings of a job that writes to PostgreSQL."))));
        Retention retention = new Retention(postgres.connection(), postgres.tables(), postgres.writer(), postgres.sinkPrefix(),
                config.dedupTtl());
        try {
            System.out.print(retention.purge(keep, BATCH_SIZE).toText());
        } catch (SQLException e) {
            throw new CannotRunException(List.of(Preflight.withoutSecrets(Preflight.oneLine(ConfigException.problem(
                    "postgres.url", "the purge stopped: " + e.getMessage(),
                    "Check that PostgreSQL is reachable and the role may delete from the sink's tables; rows"
                            + " deleted so far stay deleted, and running the command again continues.")), config)));
        }
        return ExitCode.CLEAN;
    }

    /** The job's configuration; a missing --keep is reported with its problems. */
    private static OnceflowConfig configWithKeep(ProgramArguments arguments, boolean keepMissing) {
        String missing = ConfigException.problem("--" + KEEP, "is required",
                "Give the retention window, e.g. --keep 14d (see --help).");
        OnceflowConfig config;
        try {
            config = arguments.config(System.getenv());
        } catch (ConfigException e) {
            List<String> problems = new ArrayList<>(e.problems());
            if (keepMissing) {
                problems.add(missing);
            }
            throw new ConfigException(problems);
        }
        if (keepMissing) {
            throw new ConfigException(List.of(missing));
        }
        return config;
    }
}
