package io.onceflow.sink.postgres.internal;

import io.onceflow.api.Event;
import java.io.IOException;
import java.sql.Connection;
import java.sql.SQLException;
import org.apache.flink.annotation.Internal;
import org.apache.flink.api.connector.sink2.SinkWriter;

/**
 * Internal. Writer of {@code PostgresAtLeastOnceSink}: each full batch is one autocommit upsert
 * (with an {@link EffectFunction}, one that also queues the new rows' effects), executed by
 * {@link BackgroundUpserts} while the task thread goes on; the subtask's {@link EffectWorker}
 * applies the queued effects, as in the exactly-once sink, and so also the effects an earlier
 * exactly-once run left queued. Rows the database refuses go to the rejects table (see {@link
 * EventUpsertBatch}). No fence: without prepared transactions a zombie can only write rows again,
 * which raises their {@code deliveries}, as any replay does, and never runs an effect again.
 */
@Internal
public final class PostgresAtLeastOnceWriter implements SinkWriter<Event> {
    private final Connection connection;
    private final BackgroundUpserts upserts;
    /** Null without an effect function. */
    private final EffectWorker effects;
    /** A bounded input ended: the effect worker applies the queue before the task finishes. */
    private boolean inputEnded;

    public PostgresAtLeastOnceWriter(PostgresSinkConfig config, int subtaskIndex, int parallelism,
            PostgresSinkMetrics metrics) throws IOException {
        try {
            connection = PostgresConnections.open(config, "writer-" + subtaskIndex);
        } catch (SQLException e) {
            throw new IOException("PostgreSQL sink writer " + subtaskIndex + " could not connect (" + config + ")", e);
        }
        try {
            config.schema().prepare(connection);
        } catch (SQLException | RuntimeException e) {
            PostgresConnections.closeQuietly(connection, e);
            throw new IOException("PostgreSQL sink writer " + subtaskIndex + " could not start: " + e.getMessage(), e);
        }
        upserts = new BackgroundUpserts(
                EventUpsertBatch.of(config, metrics),
                connection, "PostgreSQL sink writer " + subtaskIndex, BackgroundUpserts.MAX_IN_FLIGHT);
        effects = EffectWorker.startIfConfigured(config, subtaskIndex, parallelism, metrics);
    }

    @Override
    public void write(Event event, Context context) throws IOException {
        upserts.add(event);
    }

    /** Called by Flink before every checkpoint barrier and at end of input: all rows so far are written. */
    @Override
    public void flush(boolean endOfInput) throws IOException {
        inputEnded |= endOfInput;
        upserts.flush();
    }

    @Override
    public void close() throws SQLException {
        try {
            if (effects != null && inputEnded) {
                effects.closeAfterDraining();
            } else if (effects != null) {
                effects.close();
            }
            upserts.close();
        } finally {
            connection.close();
        }
    }
}
