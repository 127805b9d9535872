package io.onceflow.sink.postgres;

import io.onceflow.api.Event;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.commit.PendingEffects;
import io.onceflow.sink.postgres.internal.commit.PostgresCommittable;
import io.onceflow.sink.postgres.internal.commit.PostgresCommittableSerializer;
import io.onceflow.sink.postgres.internal.commit.PostgresCommitter;
import io.onceflow.sink.postgres.internal.commit.PostgresWriterState;
import io.onceflow.sink.postgres.internal.commit.PostgresWriterStateSerializer;
import io.onceflow.sink.postgres.internal.commit.TransactionId;
import io.onceflow.sink.postgres.internal.fencing.ClaimToken;
import io.onceflow.sink.postgres.internal.fencing.SinkRuns;
import io.onceflow.sink.postgres.internal.fencing.WriterFence;
import io.onceflow.sink.postgres.internal.schema.PostgresSchema;
import io.onceflow.sink.postgres.internal.writer.PostgresExactlyOnceWriter;
import io.onceflow.sink.postgres.internal.writer.WriterStart;
import java.io.IOException;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Optional;
import java.util.OptionalLong;
import org.apache.flink.annotation.VisibleForTesting;
import org.apache.flink.api.connector.sink2.Committer;
import org.apache.flink.api.connector.sink2.CommitterInitContext;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.StatefulSinkWriter;
import org.apache.flink.api.connector.sink2.SupportsCommitter;
import org.apache.flink.api.connector.sink2.SupportsWriterState;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.core.io.SimpleVersionedSerializer;

/**
 * Exactly-once sink of {@link Event}s into PostgreSQL, with PostgreSQL's own two-phase commit:
 * each writer subtask prepares one transaction per checkpoint ({@code PREPARE TRANSACTION}), and the
 * committer commits it ({@code COMMIT PREPARED}) only after Flink has completed that checkpoint. A
 * row is visible if and only if the checkpoint covering it has completed; after a failure, the
 * transactions of checkpoints that never completed are rolled back before anything is written
 * again. Build one with {@link #builder()}; see {@link TransactionId} for the gids and
 * {@link PostgresSchema} for the tables and the server setting it needs.
 *
 * <p>Rows are upserted by message id, so a duplicate that escapes dedup raises {@code deliveries}
 * instead of adding a row. The event payload must be JSON (the column is {@code jsonb}), as the
 * onceflow ingest guarantees. With an {@link EffectFunction}, the committer calls it for each new id
 * right after the checkpoint's transaction committed the id's row, its changes committed with the
 * result it records ({@link PendingEffects}).
 *
 * <p>Before a job with this sink is submitted, {@link #startRun} checks the database and registers
 * the submission as a new run of the sink prefix; put the sink it returns into the job. Writer
 * attempts of older runs, and older attempts of the same run, are fenced out in the database (see
 * {@link WriterFence}), so a paused or cut-off attempt that wakes up cannot undo its successor's work.
 *
 * <p>Keep the sink prefix stable across restarts and upgrades of a job, and unique among the jobs
 * writing to one database: on a start without a checkpoint the sink rolls back every prepared
 * transaction of its prefix (and {@link StartMode#FRESH} refuses while there are any).
 */
public final class PostgresSink
        implements Sink<Event>, SupportsCommitter<PostgresCommittable>, SupportsWriterState<Event, PostgresWriterState> {
    private static final long serialVersionUID = 1L;

    private final PostgresSinkConfig config;

    PostgresSink(PostgresSinkConfig config) {
        this.config = config;
    }

    /** A builder with the defaults described on its setters. */
    public static PostgresSinkBuilder builder() {
        return new PostgresSinkBuilder();
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
     * @return this sink bound to the new run: the one to put into the job
     * @throws IllegalStateException saying what to fix when a check fails
     * @throws PendingTransactionsException when {@link StartMode#FRESH} finds prepared transactions
     * @throws SQLException if the server cannot be reached or the tables cannot be created
     */
    public PostgresSink startRun(int parallelism, StartMode mode, String jobName) throws SQLException {
        return startRun(parallelism, mode, jobName, null);
    }

    /**
     * As {@link #startRun(int, StartMode, String)}, recording the id the Flink job will have (known
     * before submission only when it is fixed, as in application mode with high availability), so
     * that a second execution of the same job's {@code main} can {@link #continueRun} the run.
     *
     * @param flinkJobId the job's fixed id, or null when Flink assigns it at submission
     */
    public PostgresSink startRun(int parallelism, StartMode mode, String jobName, String flinkJobId)
            throws SQLException {
        return new PostgresSink(config.withRun(SinkRuns.start(config, parallelism, mode, jobName, flinkJobId)));
    }

    /**
     * This sink bound to the run that the Flink job {@code flinkJobId} registered with
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
    public Optional<PostgresSink> continueRun(int parallelism, String flinkJobId) throws SQLException {
        OptionalLong run = SinkRuns.continued(config, parallelism, flinkJobId);
        return run.isPresent() ? Optional.of(new PostgresSink(config.withRun(run.getAsLong()))) : Optional.empty();
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

    @VisibleForTesting
    PostgresSinkConfig config() {
        return config;
    }

    /** The tables this sink writes to, e.g. for printing their DDL. */
    public PostgresSchema schema() {
        return config.schema();
    }

    @Override
    public StatefulSinkWriter<Event, PostgresWriterState> createWriter(WriterInitContext context) throws IOException {
        return restoreWriter(context, new ArrayList<>());
    }

    @Override
    public StatefulSinkWriter<Event, PostgresWriterState> restoreWriter(WriterInitContext context,
            Collection<PostgresWriterState> recoveredState) throws IOException {
        return new PostgresExactlyOnceWriter(config, WriterStart.of(context, new ArrayList<>(recoveredState)),
                PostgresSinkMetrics.register(context.metricGroup()));
    }

    @Override
    public SimpleVersionedSerializer<PostgresWriterState> getWriterStateSerializer() {
        return new PostgresWriterStateSerializer();
    }

    @Override
    public Committer<PostgresCommittable> createCommitter(CommitterInitContext context) {
        return new PostgresCommitter(config, PostgresSinkMetrics.register(context.metricGroup()));
    }

    @Override
    public SimpleVersionedSerializer<PostgresCommittable> getCommittableSerializer() {
        return new PostgresCommittableSerializer();
    }

    /** The settings, without the password. */
    @Override
    public String toString() {
        return "PostgresSink{" + config + "}";
    }
}
