package io.onceflow.sink.postgres;

import io.onceflow.api.Event;
import io.onceflow.sink.postgres.internal.PostgresConnections;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.EventUpsertBatch;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.UUID;

/**
 * Compares two ways to write a batch inside a two-phase transaction; a benchmark run by hand, not a
 * test (it measures, it asserts nothing), and not in the published test jar:
 * its {@code main} with the test classpath, e.g. {@code mvn -q test-compile exec:exec -Dexec.executable=java
 * -Dexec.classpathScope=test "-Dexec.args=-classpath %classpath io.onceflow.sink.postgres.UpsertBenchmark"}
 * (it lives in this package for the sink's package-private classes); figures go to standard output.
 * Each run: 200k distinct ids in one transaction, PREPARE, COMMIT PREPARED.
 * <ul>
 *   <li>unnest: {@link EventUpsertBatch}, one INSERT ... SELECT FROM unnest(arrays) per batch;
 *   <li>rewritten batch: one INSERT ... VALUES per row, JDBC batches that pgjdbc rewrites into
 *       multi-row inserts ({@code reWriteBatchedInserts=true}).
 * </ul>
 */
final class UpsertBenchmark {
    private static final int ROWS = 200_000;
    private static final int ROUNDS = 2;

    private final SinkDatabase db = new SinkDatabase();
    private final PostgresSinkConfig config = db.config("bench");
    private final List<Event> events = new ArrayList<>();

    public static void main(String[] args) throws Exception {
        new UpsertBenchmark().compareBatchWrites();
        System.exit(0); // the embedded PostgreSQL server stops in the shutdown hook
    }

    private void compareBatchWrites() throws Exception {
        for (int i = 0; i < ROWS; i++) {
            String id = UUID.randomUUID().toString();
            String payload = "{\"id\":\"" + id + "\",\"amount\":" + i + ",\"customer\":\"customer-" + (i % 997)
                    + "\",\"note\":\"" + "x".repeat(80) + "\"}";
            events.add(new Event(id, payload.getBytes(StandardCharsets.UTF_8), "input", i % 4, i, 0L, new HashMap<>()));
        }
        try (Connection connection = PostgresConnections.open(config, "bench")) {
            config.schema().createIfMissing(connection);
        }
        for (int round = 0; round < ROUNDS; round++) {
            for (int batchSize : new int[] {1000, 5000}) {
                report("unnest", batchSize, time(batchSize, this::writeWithUnnest));
                report("rewritten batch", batchSize, time(batchSize, this::writeWithRewrittenBatches));
            }
        }
    }

    private interface BatchWrite {
        void write(Connection connection, int batchSize) throws SQLException;
    }

    private long time(int batchSize, BatchWrite write) throws SQLException {
        db.execute("TRUNCATE " + SinkDatabase.TABLE);
        String url = config.connection().jdbcUrl() + (config.connection().jdbcUrl().contains("?") ? "&" : "?") + "reWriteBatchedInserts=true";
        PostgresSinkConfig rewriting = db.builder(config.sinkPrefix()).setJdbcUrl(url).setBatchSize(batchSize).build()
                .config();
        String gid = "bench-" + UUID.randomUUID();
        long start = System.nanoTime();
        try (Connection connection = PostgresConnections.open(rewriting, "bench");
                Statement statement = connection.createStatement()) {
            connection.setAutoCommit(false);
            write.write(connection, batchSize);
            statement.execute("PREPARE TRANSACTION '" + gid + "'");
            connection.setAutoCommit(true);
            statement.execute("COMMIT PREPARED '" + gid + "'");
        }
        return System.nanoTime() - start;
    }

    private void writeWithUnnest(Connection connection, int batchSize) throws SQLException {
        EventUpsertBatch batch = new EventUpsertBatch(config.tables().events(), config.tables().rejects(), null, null, batchSize,
                PostgresSinkMetrics.unregistered());
        for (Event event : events) {
            if (batch.add(event)) {
                batch.take().executeOn(connection);
            }
        }
        if (!batch.isEmpty()) {
            batch.take().executeOn(connection);
        }
    }

    private void writeWithRewrittenBatches(Connection connection, int batchSize) throws SQLException {
        try (PreparedStatement insert = connection.prepareStatement("INSERT INTO " + config.tables().events() + " AS existing"
                + " (id, payload, source_topic, source_partition, source_offset, deliveries)"
                + " VALUES (?, ?::jsonb, ?, ?, ?, 1)"
                + " ON CONFLICT (id) DO UPDATE SET deliveries = existing.deliveries + EXCLUDED.deliveries")) {
            int pending = 0;
            for (Event event : events) {
                insert.setString(1, event.messageId);
                insert.setString(2, new String(event.payload, StandardCharsets.UTF_8));
                insert.setString(3, event.sourceTopic);
                insert.setInt(4, event.sourcePartition);
                insert.setLong(5, event.sourceOffset);
                insert.addBatch();
                if (++pending == batchSize) {
                    insert.executeBatch();
                    pending = 0;
                }
            }
            insert.executeBatch();
        }
    }

    private static void report(String method, int batchSize, long nanos) {
        System.out.printf("%-16s batch %5d: %,d rows in %,d ms = %,d rows/s%n",
                method, batchSize, ROWS, nanos / 1_000_000, (long) (ROWS / (nanos / 1e9)));
    }
}
