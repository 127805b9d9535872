package io.onceflow.sink.postgres;

import io.onceflow.api.Event;
import io.onceflow.sink.postgres.internal.PostgresAtLeastOnceWriter;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import java.io.IOException;
import org.apache.flink.annotation.Internal;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;

/**
 * Internal. The at-least-once variant of {@link PostgresSink}, from
 * {@link PostgresSinkBuilder#buildAtLeastOnce()}: the same idempotent upsert, committed batch by
 * batch. Flink flushes writers before each checkpoint barrier, so a completed checkpoint covers every
 * row before it; rows after it are written again on restart, raising {@code deliveries}.
 *
 * <p>Not flink-connector-jdbc's at-least-once sink: its per-record JDBC batches cannot merge an id
 * repeated within a batch (needed for the multi-row upsert), and this way both guarantees share one
 * upsert, one connection setup (timeouts) and one schema without another dependency.
 */
@Internal
final class PostgresAtLeastOnceSink implements Sink<Event> {
    private static final long serialVersionUID = 1L;

    private final PostgresSinkConfig config;

    public PostgresAtLeastOnceSink(PostgresSinkConfig config) {
        this.config = config;
    }

    @Override
    public SinkWriter<Event> createWriter(WriterInitContext context) throws IOException {
        return new PostgresAtLeastOnceWriter(config, context.getTaskInfo().getIndexOfThisSubtask(),
                context.getTaskInfo().getNumberOfParallelSubtasks(), PostgresSinkMetrics.register(context.metricGroup()));
    }

    @Override
    public String toString() {
        return "PostgresAtLeastOnceSink{" + config + "}";
    }
}
