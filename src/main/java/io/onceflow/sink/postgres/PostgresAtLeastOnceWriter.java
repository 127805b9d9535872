package io.onceflow.sink.postgres;

import io.onceflow.ingest.Event;
import java.io.IOException;
import java.sql.Connection;
import java.sql.SQLException;
import org.apache.flink.annotation.Internal;
import org.apache.flink.api.connector.sink2.SinkWriter;

/** Internal. Writer of {@link PostgresAtLeastOnceSink}: each full batch is one autocommit upsert. */
@Internal
final class PostgresAtLeastOnceWriter implements SinkWriter<Event> {
    private final int subtaskIndex;
    private final EventUpsertBatch batch;
    private final Connection connection;

    PostgresAtLeastOnceWriter(PostgresSinkConfig config, int subtaskIndex) throws IOException {
        this.subtaskIndex = subtaskIndex;
        this.batch = new EventUpsertBatch(config.table(), config.batchSize());
        try {
            connection = PostgresConnections.open(config, "writer-" + subtaskIndex);
        } catch (SQLException e) {
            throw new IOException("PostgreSQL sink writer " + subtaskIndex + " could not connect (" + config + ")", e);
        }
        try {
            config.schema().createIfMissing(connection);
        } catch (SQLException | RuntimeException e) {
            PostgresConnections.closeQuietly(connection, e);
            throw new IOException("PostgreSQL sink writer " + subtaskIndex + " could not start", e);
        }
    }

    @Override
    public void write(Event event, Context context) throws IOException {
        if (batch.add(event)) {
            flush(false);
        }
    }

    /** Called by Flink before every checkpoint barrier and at end of input. */
    @Override
    public void flush(boolean endOfInput) throws IOException {
        if (batch.isEmpty()) {
            return;
        }
        try {
            batch.writeTo(connection);
        } catch (SQLException e) {
            throw new IOException("PostgreSQL sink writer " + subtaskIndex + " could not write a batch", e);
        }
    }

    @Override
    public void close() throws SQLException {
        connection.close();
    }
}
