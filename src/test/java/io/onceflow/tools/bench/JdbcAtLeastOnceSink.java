package io.onceflow.tools.bench;

import static java.nio.charset.StandardCharsets.UTF_8;

import io.onceflow.api.Event;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.config.PostgresSettings;
import io.onceflow.job.OnceflowPipeline;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.util.Optional;
import org.apache.flink.connector.jdbc.JdbcConnectionOptions;
import org.apache.flink.connector.jdbc.JdbcExecutionOptions;
import org.apache.flink.connector.jdbc.core.datastream.sink.JdbcSink;

/**
 * flink-connector-jdbc's at-least-once {@link JdbcSink} in place of onceflow's at-least-once
 * PostgreSQL sink (scenario {@code jdbc-alo}), writing the same rows into the same table (created by
 * the job's own sink start, {@code JobStart}) with a statement of the same effect: one
 * row per message id, and a repeat raises {@code deliveries}.
 *
 * <p>The differences are the connector's: one {@code INSERT ... VALUES} per row, sent as a JDBC
 * batch ({@code executeBatch}) on the task thread, where onceflow sends one {@code INSERT ... SELECT
 * FROM unnest(...)} per batch from a background thread. Per-row statements take an id twice in one
 * batch (onceflow merges such repeats first, as one statement cannot update a row twice); pgjdbc's
 * {@code reWriteBatchedInserts} would turn them into a multi-row statement and fail on that, so it
 * stays off (its default). A row PostgreSQL refuses fails the batch, which the connector retries and
 * then fails the job, where onceflow's writer puts the row into the rejects table (the benchmark's
 * input has no such rows).
 */
final class JdbcAtLeastOnceSink {
    private static final String POSTGRES_DRIVER = "org.postgresql.Driver";

    private JdbcAtLeastOnceSink() {}

    /** {@code configured} with the JdbcSink in place of its PostgreSQL sink. */
    static OnceflowPipeline.Sinks inPlaceOfOurs(OnceflowPipeline.Sinks configured, OnceflowConfig config) {
        PostgresSettings postgres = config.postgres().orElseThrow();
        JdbcSink<Event> sink = JdbcSink.<Event>builder()
                .withQueryStatement("INSERT INTO " + postgres.table() + " AS existing"
                        + " (id, payload, source_topic, source_partition, source_offset, deliveries)"
                        + " VALUES (?, ?::jsonb, ?, ?, ?, 1)"
                        + " ON CONFLICT (id) DO UPDATE SET deliveries = existing.deliveries + 1",
                        JdbcAtLeastOnceSink::bind)
                // as onceflow's writer: a batch goes when full or at the checkpoint barrier (no timer);
                // the connector's own retries
                .withExecutionOptions(JdbcExecutionOptions.builder()
                        .withBatchSize(postgres.batchSize())
                        .withBatchIntervalMs(0)
                        .withMaxRetries(JdbcExecutionOptions.DEFAULT_MAX_RETRY_TIMES)
                        .build())
                .buildAtLeastOnce(new JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
                        .withUrl(postgres.url())
                        .withDriverName(POSTGRES_DRIVER)
                        .withUsername(postgres.user())
                        .withPassword(postgres.password())
                        .build());
        return new OnceflowPipeline.Sinks(configured.kafkaOutput(), configured.deadLetters(), Optional.of(sink));
    }

    private static void bind(PreparedStatement statement, Event event) throws SQLException {
        statement.setString(1, event.messageId);
        statement.setString(2, new String(event.payload, UTF_8));
        statement.setString(3, event.sourceTopic);
        statement.setInt(4, event.sourcePartition);
        statement.setLong(5, event.sourceOffset);
    }
}
