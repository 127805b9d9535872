package io.onceflow.sink.postgres;

import io.onceflow.ingest.Event;
import java.io.IOException;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.Collection;
import org.apache.flink.annotation.VisibleForTesting;
import org.apache.flink.api.connector.sink2.Committer;
import org.apache.flink.api.connector.sink2.CommitterInitContext;
import org.apache.flink.api.connector.sink2.InitContext;
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
 * onceflow ingest guarantees.
 *
 * <p>Keep the sink prefix stable across restarts and upgrades of a job, and unique among the jobs
 * writing to one database: on a start without a checkpoint the sink rolls back every prepared
 * transaction of its prefix.
 */
public final class PostgresSink
        implements Sink<Event>, SupportsCommitter<PostgresCommittable>, SupportsWriterState<Event, Void> {
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
     * Checks, before the job is submitted, what the writers check again at start-up: the server
     * accepts the connection, allows enough prepared transactions for {@code parallelism} writer
     * subtasks, and the tables exist (creating them if missing).
     *
     * @throws IllegalStateException if {@code max_prepared_transactions} is too low, saying how to
     *     raise it
     * @throws SQLException if the server cannot be reached or the tables cannot be created
     */
    public void checkPreconditions(int parallelism) throws SQLException {
        try (Connection connection = PostgresConnections.open(config, "precondition-check")) {
            PostgresSchema.checkMaxPreparedTransactions(connection, parallelism);
            config.schema().createIfMissing(connection);
        }
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
    public StatefulSinkWriter<Event, Void> createWriter(WriterInitContext context) throws IOException {
        return newWriter(context);
    }

    @Override
    public StatefulSinkWriter<Event, Void> restoreWriter(WriterInitContext context, Collection<Void> noState)
            throws IOException {
        return newWriter(context);
    }

    private PostgresExactlyOnceWriter newWriter(InitContext context) throws IOException {
        return new PostgresExactlyOnceWriter(config, context.getTaskInfo().getIndexOfThisSubtask(),
                context.getTaskInfo().getNumberOfParallelSubtasks(), context.getRestoredCheckpointId());
    }

    @Override
    public SimpleVersionedSerializer<Void> getWriterStateSerializer() {
        return new NoWriterState();
    }

    @Override
    public Committer<PostgresCommittable> createCommitter(CommitterInitContext context) {
        return new PostgresCommitter(config);
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

    /**
     * The writer keeps no state (see {@link PostgresExactlyOnceWriter}); Flink still wants a
     * serializer for it.
     */
    private static final class NoWriterState implements SimpleVersionedSerializer<Void> {
        @Override
        public int getVersion() {
            return 1;
        }

        @Override
        public byte[] serialize(Void nothing) {
            throw new UnsupportedOperationException("the PostgreSQL sink writer has no state to serialize");
        }

        @Override
        public Void deserialize(int version, byte[] serialized) throws IOException {
            throw new IOException("the PostgreSQL sink writer has no state, but the checkpoint holds some");
        }
    }
}
