package io.onceflow.sink.postgres;

import io.onceflow.ingest.Event;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.flink.annotation.Internal;
import org.postgresql.jdbc.PgConnection;

/**
 * Internal. Collects events and writes them to the event table as one idempotent upsert: a single
 * {@code INSERT ... SELECT FROM unnest(<one array per column>) ON CONFLICT (id) DO UPDATE} per batch
 * (one statement and one round trip whatever the batch size; measured faster than pgjdbc's
 * rewritten multi-row batches, see the report of {@code EventUpsertBenchmark}).
 *
 * <p>An id already in the table gets its {@code deliveries} raised instead of a second row. An id
 * repeated inside one batch is merged here first, counting its deliveries, because {@code ON
 * CONFLICT DO UPDATE} refuses to touch the same row twice in one statement. The first delivery's
 * payload and source position are kept, as the table keeps the first row.
 *
 * <p>A row's values are copied out of the event when it is added, and the event is not kept: with
 * object reuse on, an upstream operator may legitimately change an event after emitting it.
 */
@Internal
final class EventUpsertBatch {
    private final String upsertSql;
    private final int capacity;
    /** Insertion order is kept so that rows are written in arrival order. */
    private final Map<String, PendingRow> rowsById = new LinkedHashMap<>();

    EventUpsertBatch(String table, int capacity) {
        SqlIdentifiers.requireTableName("table", table);
        this.upsertSql = "INSERT INTO " + table + " AS existing"
                + " (id, payload, source_topic, source_partition, source_offset, deliveries)"
                + " SELECT * FROM unnest(?::text[], ?::text[]::jsonb[], ?::text[], ?::int[], ?::bigint[], ?::int[])"
                + " ON CONFLICT (id) DO UPDATE SET deliveries = existing.deliveries + EXCLUDED.deliveries";
        this.capacity = capacity;
    }

    /** @return true if the batch is now full and should be written */
    boolean add(Event event) {
        PendingRow row = rowsById.get(event.messageId);
        if (row == null) {
            row = new PendingRow(event);
            rowsById.put(event.messageId, row);
        }
        row.deliveries++;
        return rowsById.size() >= capacity;
    }

    boolean isEmpty() {
        return rowsById.isEmpty();
    }

    /**
     * Empties the batch into an upsert that no longer depends on it, so that the batch can fill
     * again while another thread executes the upsert.
     */
    Upsert take() {
        int size = rowsById.size();
        String[] ids = new String[size];
        String[] payloads = new String[size];
        String[] topics = new String[size];
        int[] partitions = new int[size];
        long[] offsets = new long[size];
        int[] deliveries = new int[size];
        int i = 0;
        for (Map.Entry<String, PendingRow> entry : rowsById.entrySet()) {
            PendingRow row = entry.getValue();
            ids[i] = entry.getKey();
            payloads[i] = row.payload;
            topics[i] = row.sourceTopic;
            partitions[i] = row.sourcePartition;
            offsets[i] = row.sourceOffset;
            deliveries[i] = row.deliveries;
            i++;
        }
        rowsById.clear();
        return connection -> {
            // pgjdbc's own createArrayOf takes primitive arrays too (no boxing).
            PgConnection pg = connection.unwrap(PgConnection.class);
            try (PreparedStatement upsert = connection.prepareStatement(upsertSql)) {
                upsert.setArray(1, pg.createArrayOf("text", ids));
                upsert.setArray(2, pg.createArrayOf("text", payloads));
                upsert.setArray(3, pg.createArrayOf("text", topics));
                upsert.setArray(4, pg.createArrayOf("int4", partitions));
                upsert.setArray(5, pg.createArrayOf("int8", offsets));
                upsert.setArray(6, pg.createArrayOf("int4", deliveries));
                upsert.executeUpdate();
            }
        };
    }

    /** One batch's upsert, detached from the batch. */
    @FunctionalInterface
    interface Upsert {
        /** Runs in {@code connection}'s current transaction (or autocommit). */
        void executeOn(Connection connection) throws SQLException;
    }

    /** The values of the first event seen for an id in this batch, and how often the id arrived. */
    private static final class PendingRow {
        final String payload;
        final String sourceTopic;
        final int sourcePartition;
        final long sourceOffset;
        int deliveries;

        PendingRow(Event first) {
            this.payload = new String(first.payload, StandardCharsets.UTF_8);
            this.sourceTopic = first.sourceTopic;
            this.sourcePartition = first.sourcePartition;
            this.sourceOffset = first.sourceOffset;
        }
    }
}
