package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.internal.PendingTransactionsException;
import io.onceflow.sink.postgres.internal.EffectFunction;
import io.onceflow.sink.postgres.options.StartMode;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.ClaimToken;
import io.onceflow.sink.postgres.internal.SinkRuns;
import io.onceflow.sink.postgres.internal.PostgresSchema;
import java.sql.SQLException;
import java.util.Optional;
import java.util.OptionalLong;
import org.apache.flink.annotation.VisibleForTesting;

/**
 * The runs of one sink prefix in its database, from {@link PostgresSinkBuilder#build()}: what a job
 * does once per submission, before its graph is built. An exactly-once {@link PostgresSink} is
 * obtained only from a {@link RegisteredRun}, so a job cannot write without the start checks, and
 * its writers are fenced against every earlier run and attempt (see "Zombie attempts" in
 * docs/failover.md).
 *
 * <p>Keep the sink prefix stable across restarts and upgrades of a job, and unique among the jobs
 * writing to one database: on a start without a checkpoint the sink rolls back every prepared
 * transaction of its prefix (and {@link StartMode#FRESH} refuses while there are any).
 */
public final class PostgresRunRegistry {
    private final PostgresSinkConfig config;

    PostgresRunRegistry(PostgresSinkConfig config) {
        this.config = config;
    }

    /**
     * Checks the database and registers a new run of this sink's prefix, before the job is
     * submitted: the server stores UTF-8, the connection is not pooled per transaction, it allows
     * enough prepared transactions for {@code parallelism} writer subtasks, the tables exist
     * (created if missing, and given the {@code result} column an effect needs), the
     * {@link EffectFunction} if any can be called, no live job uses the prefix, and, for
     * {@link StartMode#FRESH}, no transaction of the prefix is prepared.
     *
     * @param jobName recorded with the run, to name this job in other jobs' errors
     * @return the new run, whose {@link RegisteredRun#sink()} is the one to put into the job
     * @throws IllegalStateException saying what to fix when a check fails
     * @throws PendingTransactionsException when {@link StartMode#FRESH} finds prepared transactions
     * @throws SQLException if the server cannot be reached or the tables cannot be created
     */
    public RegisteredRun startRun(int parallelism, StartMode mode, String jobName) throws SQLException {
        return startRun(parallelism, mode, jobName, null);
    }

    /**
     * As {@link #startRun(int, StartMode, String)}, recording the id the Flink job will have (known
     * before submission only when it is fixed, as in application mode with high availability), so
     * that a second execution of the same job's {@code main} can {@link #continueRun} the run.
     *
     * @param flinkJobId the job's fixed id, or null when Flink assigns it at submission
     */
    public RegisteredRun startRun(int parallelism, StartMode mode, String jobName, String flinkJobId)
            throws SQLException {
        return new RegisteredRun(config.withRun(SinkRuns.start(config, parallelism, mode, jobName, flinkJobId)));
    }

    /**
     * The run that the Flink job {@code flinkJobId} registered with
     * {@link #startRun(int, StartMode, String, String)}, without a new run and without the checks
     * that the job's own writers and transactions would fail (those that do not depend on them run,
     * for {@code parallelism} subtasks); empty if that job registered none.
     *
     * <p>For a second execution of one job's {@code main}: in application mode with high
     * availability, a new JobManager runs {@code main} again and attaches it to the recovered job,
     * whose writers belong to the run the first execution registered. A new run would stop them as
     * replaced, and the start checks would refuse their own live sessions and pending transactions.
     * Their fencing within the run (restored checkpoint, attempt) still orders them against the
     * previous JobManager's attempts, by restored checkpoint and attempt number (see
     * {@code ClaimToken} for what that cannot order).
     *
     * @throws IllegalStateException if a newer run replaced that job's, or a check fails
     */
    public Optional<RegisteredRun> continueRun(int parallelism, String flinkJobId) throws SQLException {
        OptionalLong run = SinkRuns.continued(config, parallelism, flinkJobId);
        return run.isPresent() ? Optional.of(new RegisteredRun(config.withRun(run.getAsLong()))) : Optional.empty();
    }

    /**
     * Checks the database before a job with this sink in at-least-once mode is submitted: the server
     * stores UTF-8, the tables exist (created if missing; with an effect as for {@link #startRun}),
     * no live job uses the prefix, and no transaction of the prefix is prepared (an earlier
     * exactly-once run's, which at-least-once writers could neither commit nor roll back), unless
     * {@code discardPending} rolls them back.
     *
     * @throws PendingTransactionsException if transactions of the prefix are prepared and
     *     {@code discardPending} is false; the message says what to do
     * @throws IllegalStateException naming what to fix, if a check fails
     */
    public void startAtLeastOnce(boolean discardPending) throws SQLException {
        SinkRuns.startAtLeastOnce(config, discardPending);
    }


    /** The tables of this sink, e.g. for printing their DDL. */
    public PostgresSchema schema() {
        return config.schema();
    }

    @VisibleForTesting
    PostgresSinkConfig config() {
        return config;
    }

    /** The settings, without the password. */
    @Override
    public String toString() {
        return "PostgresRunRegistry{" + config + "}";
    }
}
