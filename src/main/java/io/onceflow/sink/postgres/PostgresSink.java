package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.internal.ReplacedRunException;
import io.onceflow.sink.postgres.internal.EffectFunction;
import io.onceflow.sink.postgres.options.StartMode;
import io.onceflow.api.Event;
import io.onceflow.sink.postgres.internal.PostgresConnections;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.PostgresCommittable;
import io.onceflow.sink.postgres.internal.PostgresCommittableSerializer;
import io.onceflow.sink.postgres.internal.PostgresCommitter;
import io.onceflow.sink.postgres.internal.PostgresWriterState;
import io.onceflow.sink.postgres.internal.PostgresWriterStateSerializer;
import io.onceflow.sink.postgres.internal.SinkRuns;
import io.onceflow.sink.postgres.internal.PostgresExactlyOnceWriter;
import io.onceflow.sink.postgres.internal.WriterStart;
import java.io.IOException;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Collection;
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
 * again. Build one with {@link #builder()}; see {@code TransactionId} for the gids and
 * {@code PostgresSchema} for the tables and the server setting it needs.
 *
 * <p>Rows are upserted by message id, so a duplicate that escapes dedup raises {@code deliveries}
 * instead of adding a row. The event payload must be JSON (the column is {@code jsonb}), as the
 * onceflow ingest guarantees. With an {@link EffectFunction}, the committer calls it for each new id
 * right after the checkpoint's transaction committed the id's row, its changes committed with the
 * result it records ({@code PendingEffects}).
 *
 * <p>Before a job with this sink is submitted, {@link PostgresRunRegistry#startRun} checks the
 * database and registers the submission as a new run of the sink prefix; the sink comes from that
 * {@link RegisteredRun}, the only way to obtain one. Writer attempts of older runs, and older attempts
 * of the same run, are fenced out in the database (see {@code WriterClaim}), so a paused or cut-off
 * attempt that wakes up cannot undo its successor's work.
 *
 * <p>Keep the sink prefix stable across restarts and upgrades of a job, and unique among the jobs
 * writing to one database: on a start without a checkpoint the sink rolls back every prepared
 * transaction of its prefix (and {@link StartMode#FRESH} refuses while there are any).
 */
public final class PostgresSink
        implements Sink<Event>, SupportsCommitter<PostgresCommittable>, SupportsWriterState<Event, PostgresWriterState> {
    private static final long serialVersionUID = 1L;

    private final PostgresSinkConfig config;

    /** Only through a run: {@link RegisteredRun#sink()}. */
    PostgresSink(PostgresSinkConfig config) {
        if (config.run() == PostgresSinkConfig.NO_RUN) {
            throw new IllegalArgumentException("an exactly-once PostgreSQL sink needs a registered run");
        }
        this.config = config;
    }

    /** A builder with the defaults described on its setters. */
    public static PostgresSinkBuilder builder() {
        return new PostgresSinkBuilder();
    }

    @VisibleForTesting
    PostgresSinkConfig config() {
        return config;
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
        return new PostgresCommitter(config, PostgresSinkMetrics.register(context.metricGroup()),
                context.getJobInfo().getJobId().toHexString());
    }

    @Override
    public SimpleVersionedSerializer<PostgresCommittable> getCommittableSerializer() {
        return new PostgresCommittableSerializer();
    }

    /**
     * Refuses unless this sink's run is still the newest of its prefix. The job's Kafka sinks call it
     * before they create any producer: a replaced job's restart must not fence the newer job's
     * producers (see {@link ReplacedRunException}).
     *
     * @throws ReplacedRunException if a newer run of the prefix was registered
     * @throws IOException if the database cannot be asked
     */
    public void requireCurrentRun() throws IOException {
        try (Connection connection = PostgresConnections.open(config, "run-check")) {
            SinkRuns.refuseIfReplaced(connection, config);
        } catch (SQLException e) {
            throw new IOException("could not check the run of PostgreSQL sink prefix '" + config.sinkPrefix() + "' ("
                    + config + "): " + e.getMessage(), e);
        }
    }

    /** The settings, without the password. */
    @Override
    public String toString() {
        return "PostgresSink{" + config + "}";
    }
}
