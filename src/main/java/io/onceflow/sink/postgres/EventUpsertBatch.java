package io.onceflow.sink.postgres;

import io.onceflow.ingest.Event;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Savepoint;
import java.sql.Statement;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.flink.annotation.Internal;
import org.apache.flink.metrics.Counter;
import org.postgresql.jdbc.PgConnection;
import org.postgresql.util.PSQLException;
import org.postgresql.util.ServerErrorMessage;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

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
 * <p><b>Rows the database refuses.</b> No input may stop the job: a row that PostgreSQL refuses
 * with a data error ({@link #isRowDataError}: a value the column type cannot take, a user's CHECK
 * or foreign key, a trigger's exception) would otherwise fail the transaction on every replay. Each
 * batch therefore runs under a savepoint (inside a transaction; in autocommit a failed statement
 * affects nothing else). When it fails with a data error, the batch is rolled back to the savepoint
 * and split in halves, recursively, until the refused rows stand alone; each is then written to the
 * rejects table with its SQLSTATE and message, in the same transaction as the rows that went in, and
 * counted. Other errors (lost connection, lock or statement timeout, serialization failure,
 * permissions) are not about one row: they fail the task, which replays from the checkpoint.
 * Savepoints are subtransactions: more than 64 batches in one checkpoint's transaction overflow
 * PostgreSQL's per-backend subtransaction cache (see docs/operations.md on sizing).
 *
 * <p>A row's values are copied out of the event when it is added, and the event is not kept: with
 * object reuse on, an upstream operator may legitimately change an event after emitting it.
 */
@Internal
final class EventUpsertBatch {
    private static final Logger LOG = LoggerFactory.getLogger(EventUpsertBatch.class);

    private final String upsertSql;
    private final String rejectSql;
    private final int capacity;
    private final Counter rowsRejected;
    /** Insertion order is kept so that rows are written in arrival order. */
    private final Map<String, PendingRow> rowsById = new LinkedHashMap<>();

    EventUpsertBatch(String table, String rejectsTable, int capacity, Counter rowsRejected) {
        SqlIdentifiers.requireTableName("table", table);
        SqlIdentifiers.requireTableName("rejects table", rejectsTable);
        this.upsertSql = "INSERT INTO " + table + " AS existing"
                + " (id, payload, source_topic, source_partition, source_offset, deliveries)"
                + " SELECT * FROM unnest(?::text[], ?::text[]::jsonb[], ?::text[], ?::int[], ?::bigint[], ?::int[])"
                + " ON CONFLICT (id) DO UPDATE SET deliveries = existing.deliveries + EXCLUDED.deliveries";
        this.rejectSql = "INSERT INTO " + rejectsTable + " AS existing"
                + " (id, payload, source_topic, source_partition, source_offset, deliveries, sql_state, error)"
                + " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                + " ON CONFLICT (id_hash) DO UPDATE SET deliveries = existing.deliveries + EXCLUDED.deliveries";
        this.capacity = capacity;
        this.rowsRejected = rowsRejected;
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
        Rows rows = new Rows(rowsById.size());
        int i = 0;
        for (Map.Entry<String, PendingRow> entry : rowsById.entrySet()) {
            rows.set(i++, entry.getKey(), entry.getValue());
        }
        rowsById.clear();
        return connection -> {
            checkConstraintsPerStatement(connection);
            writeIsolatingRefusedRows(connection, rows);
        };
    }

    /**
     * A user's deferred constraint (a {@code DEFERRABLE INITIALLY DEFERRED} foreign key, a deferred
     * constraint trigger) would fire at {@code PREPARE TRANSACTION}, outside every batch's savepoint,
     * and fail the whole transaction on every replay. Checked at each statement instead, a refused
     * row is isolated like any other. Transaction-scoped, so set for each batch (one round trip).
     */
    private static void checkConstraintsPerStatement(Connection connection) throws SQLException {
        if (!connection.getAutoCommit()) {
            try (Statement statement = connection.createStatement()) {
                statement.execute("SET CONSTRAINTS ALL IMMEDIATE");
            }
        }
    }

    /** One batch's upsert, detached from the batch. */
    @FunctionalInterface
    interface Upsert {
        /** Runs in {@code connection}'s current transaction (or autocommit). */
        void executeOn(Connection connection) throws SQLException;
    }

    private void writeIsolatingRefusedRows(Connection connection, Rows rows) throws SQLException {
        Savepoint savepoint = connection.getAutoCommit() ? null : connection.setSavepoint();
        try {
            upsert(connection, rows);
        } catch (SQLException e) {
            if (!isRowDataError(e)) {
                throw e; // the transaction is aborted: the task fails and replays from the checkpoint
            }
            if (savepoint != null) {
                connection.rollback(savepoint);
            }
            if (rows.size() == 1) {
                reject(connection, rows, e);
            } else {
                int middle = rows.size() / 2;
                writeIsolatingRefusedRows(connection, rows.range(0, middle));
                writeIsolatingRefusedRows(connection, rows.range(middle, rows.size()));
            }
            return;
        }
        if (savepoint != null) {
            connection.releaseSavepoint(savepoint);
        }
    }

    private void upsert(Connection connection, Rows rows) throws SQLException {
        // pgjdbc's own createArrayOf takes primitive arrays too (no boxing).
        PgConnection pg = connection.unwrap(PgConnection.class);
        try (PreparedStatement upsert = connection.prepareStatement(upsertSql)) {
            upsert.setArray(1, pg.createArrayOf("text", rows.ids));
            upsert.setArray(2, pg.createArrayOf("text", rows.payloads));
            upsert.setArray(3, pg.createArrayOf("text", rows.topics));
            upsert.setArray(4, pg.createArrayOf("int4", rows.partitions));
            upsert.setArray(5, pg.createArrayOf("int8", rows.offsets));
            upsert.setArray(6, pg.createArrayOf("int4", rows.deliveries));
            upsert.executeUpdate();
        }
    }

    /** Writes the only row of {@code rows} to the rejects table. */
    private void reject(Connection connection, Rows rows, SQLException refusal) throws SQLException {
        final int only = 0;
        String error = describe(refusal);
        try (PreparedStatement insert = connection.prepareStatement(rejectSql)) {
            insert.setString(1, rows.ids[only]);
            insert.setString(2, rows.payloads[only]);
            insert.setString(3, rows.topics[only]);
            insert.setInt(4, rows.partitions[only]);
            insert.setLong(5, rows.offsets[only]);
            insert.setInt(6, rows.deliveries[only]);
            insert.setString(7, refusal.getSQLState());
            insert.setString(8, error);
            insert.executeUpdate();
        }
        rowsRejected.inc();
        LOG.warn("PostgreSQL refused the row of message id '{}' ({}:{}@{}) with SQLSTATE {}: {}. It is recorded in the"
                + " rejects table instead of the event table.", rows.ids[only], rows.topics[only], rows.partitions[only],
                rows.offsets[only], refusal.getSQLState(), error);
    }

    /** The server's message and the constraint it names, without the DETAIL (which quotes the row). */
    private static String describe(SQLException refusal) {
        ServerErrorMessage server = refusal instanceof PSQLException ? ((PSQLException) refusal).getServerErrorMessage() : null;
        if (server == null || server.getMessage() == null) {
            return String.valueOf(refusal.getMessage());
        }
        return server.getMessage() + (server.getConstraint() == null ? "" : " (constraint " + server.getConstraint() + ")");
    }

    /**
     * Whether PostgreSQL refused the data of a row rather than failed for a reason of its own:
     * SQLSTATE classes 22 (data exception), 23 (integrity constraint violation), 54 (program limit
     * exceeded, e.g. an index row too large), P0 (raised by PL/pgSQL, e.g. in a trigger), and 2F, 38,
     * 39 (exceptions in SQL or external routines).
     */
    static boolean isRowDataError(SQLException e) {
        String state = e.getSQLState();
        if (state == null || state.length() != 5) {
            return false;
        }
        switch (state.substring(0, 2)) {
            case "22":
            case "23":
            case "54":
            case "P0":
            case "2F":
            case "38":
            case "39":
                return true;
            default:
                return false;
        }
    }

    /** A batch as one array per column, so that a range of it can be written alone. */
    private static final class Rows {
        final String[] ids;
        final String[] payloads;
        final String[] topics;
        final int[] partitions;
        final long[] offsets;
        final int[] deliveries;

        Rows(int size) {
            ids = new String[size];
            payloads = new String[size];
            topics = new String[size];
            partitions = new int[size];
            offsets = new long[size];
            deliveries = new int[size];
        }

        void set(int i, String id, PendingRow row) {
            ids[i] = id;
            payloads[i] = row.payload;
            topics[i] = row.sourceTopic;
            partitions[i] = row.sourcePartition;
            offsets[i] = row.sourceOffset;
            deliveries[i] = row.deliveries;
        }

        int size() {
            return ids.length;
        }

        /** Rows {@code from} (inclusive) to {@code to} (exclusive), copied. */
        Rows range(int from, int to) {
            Rows range = new Rows(to - from);
            System.arraycopy(ids, from, range.ids, 0, range.size());
            System.arraycopy(payloads, from, range.payloads, 0, range.size());
            System.arraycopy(topics, from, range.topics, 0, range.size());
            System.arraycopy(partitions, from, range.partitions, 0, range.size());
            System.arraycopy(offsets, from, range.offsets, 0, range.size());
            System.arraycopy(deliveries, from, range.deliveries, 0, range.size());
            return range;
        }
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
