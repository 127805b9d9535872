package io.onceflow.sink.postgres.internal.writer;

import io.onceflow.api.Event;
import io.onceflow.sink.postgres.EffectFunction;
import io.onceflow.sink.postgres.internal.PostgresConnections;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.commit.EffectCalls;
import io.onceflow.sink.postgres.internal.commit.PendingEffects;
import io.onceflow.sink.postgres.internal.commit.TransactionId;
import io.onceflow.sink.postgres.internal.schema.SqlIdentifiers;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Savepoint;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Predicate;
import org.apache.flink.annotation.Internal;
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
 * <p><b>With an {@link EffectFunction}</b> the events table is the inbox, and a batch takes three
 * statements instead of one, whatever its size, in the open transaction (in autocommit, the
 * at-least-once sink, the batch is a transaction of its own: no inbox row commits without its
 * effect):
 *
 * <ol>
 *   <li>{@code INSERT ... ON CONFLICT (id) DO NOTHING RETURNING id}: RETURNING returns the
 *       inserted rows only, so these are the new ids. Rows the database refuses are isolated as
 *       above.
 *   <li>{@code UPDATE ... SET deliveries = deliveries + n} for the others: a new statement, so in
 *       read committed it sees a row that another transaction committed while the insert waited
 *       for it.
 *   <li>{@code UPDATE ... SET result = f(id, payload)} for the new ids, counting the results. It
 *       runs under a savepoint of its own: when the function raises an error about the data (the
 *       classes of {@link #isRowDataError}, e.g. {@code RAISE EXCEPTION}), the new ids are split in
 *       halves until the failing ones stand alone, and each of those gets the result {@code
 *       {"status":"failed","sqlstate":...,"error":...}} (the message stays consumed). Every other
 *       error fails the task, which replays from the checkpoint.
 * </ol>
 *
 * <p>A row's values are copied out of the event when it is added, and the event is not kept: with
 * object reuse on, an upstream operator may legitimately change an event after emitting it.
 */
@Internal
public final class EventUpsertBatch {
    private static final Logger LOG = LoggerFactory.getLogger(EventUpsertBatch.class);

    /** The columns of a batch, bound as one array each. */
    private static final String BATCH_ROWS = " (id, payload, source_topic, source_partition, source_offset, deliveries)"
            + " SELECT * FROM unnest(?::text[], ?::text[]::jsonb[], ?::text[], ?::int[], ?::bigint[], ?::int[])";
    /** As {@link #BATCH_ROWS}, each tagged with the gid of the transaction (the 7th parameter). */
    private static final String BATCH_ROWS_OF_A_TRANSACTION = " (id, payload, source_topic, source_partition,"
            + " source_offset, deliveries, effect_transaction) SELECT *, ?::text FROM unnest(?::text[],"
            + " ?::text[]::jsonb[], ?::text[], ?::int[], ?::bigint[], ?::int[])";

    private final String upsertSql;
    private final String rejectSql;
    /** The statements of an effect called in the batch, null without one (or when it is called at commit). */
    private final String insertNewSql;
    private final String addDeliveriesSql;
    private final EffectCalls effectCalls;
    /** Whether new rows are tagged with {@link #effectTransaction}, for their effects at commit. */
    private final boolean effectsAtCommit;
    private final int capacity;
    private final PostgresSinkMetrics metrics;
    /** Insertion order is kept so that rows are written in arrival order. */
    private final Map<String, PendingRow> rowsById = new LinkedHashMap<>();
    /** The gid of the transaction the rows go into, when effects are called at its commit. */
    private String effectTransaction;

    /**
     * @param effectFunction null for none
     * @param effectsAtCommit whether the effect is called after the transaction commits, for the rows
     *     it inserted ({@link PendingEffects}, the exactly-once sink), rather than in the batch (the
     *     at-least-once sink); ignored without an effect
     */
    public EventUpsertBatch(String table, String rejectsTable, String effectFunction, boolean effectsAtCommit,
            int capacity, PostgresSinkMetrics metrics) {
        SqlIdentifiers.requireTableName("table", table);
        SqlIdentifiers.requireTableName("rejects table", rejectsTable);
        this.effectsAtCommit = effectFunction != null && effectsAtCommit;
        // a conflict leaves effect_transaction as the first insert set it: the effect stays once
        this.upsertSql = this.effectsAtCommit
                ? "INSERT INTO " + table + " AS existing" + BATCH_ROWS_OF_A_TRANSACTION
                        + " ON CONFLICT (id) DO UPDATE SET deliveries = existing.deliveries + EXCLUDED.deliveries"
                : "INSERT INTO " + table + " AS existing" + BATCH_ROWS
                        + " ON CONFLICT (id) DO UPDATE SET deliveries = existing.deliveries + EXCLUDED.deliveries";
        this.rejectSql = "INSERT INTO " + rejectsTable + " AS existing"
                + " (id, payload, source_topic, source_partition, source_offset, deliveries, sql_state, error)"
                + " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                + " ON CONFLICT (id_hash) DO UPDATE SET deliveries = existing.deliveries + EXCLUDED.deliveries";
        if (effectFunction == null || this.effectsAtCommit) {
            insertNewSql = addDeliveriesSql = null;
            effectCalls = null;
        } else {
            insertNewSql = "INSERT INTO " + table + BATCH_ROWS + " ON CONFLICT (id) DO NOTHING RETURNING id";
            addDeliveriesSql = "UPDATE " + table + " AS existing SET deliveries = existing.deliveries + u.deliveries"
                    + " FROM unnest(?::text[], ?::int[]) AS u(id, deliveries) WHERE existing.id = u.id";
            effectCalls = new EffectCalls(table, effectFunction, metrics);
        }
        this.capacity = capacity;
        this.metrics = metrics;
    }

    /** The batch of a writer of the sink configured by {@code config}; see the constructor for {@code effectsAtCommit}. */
    public static EventUpsertBatch of(PostgresSinkConfig config, boolean effectsAtCommit, PostgresSinkMetrics metrics) {
        return new EventUpsertBatch(config.table(), config.rejectsTable(), config.effectFunction(), effectsAtCommit,
                config.batchSize(), metrics);
    }

    /**
     * Tags the rows that the next upserts insert with the gid of the transaction they go into (with
     * effects at commit; ignored otherwise). Call before the first row of each transaction.
     */
    public void effectsBelongTo(TransactionId transaction) {
        effectTransaction = transaction.encode();
    }

    /** @return true if the batch is now full and should be written */
    public boolean add(Event event) {
        PendingRow row = rowsById.get(event.messageId);
        if (row == null) {
            row = new PendingRow(event);
            rowsById.put(event.messageId, row);
        }
        row.deliveries++;
        return rowsById.size() >= capacity;
    }

    public boolean isEmpty() {
        return rowsById.isEmpty();
    }

    /**
     * Empties the batch into an upsert that no longer depends on it, so that the batch can fill
     * again while another thread executes the upsert.
     */
    public Upsert take() {
        Rows rows = new Rows(rowsById.size());
        int i = 0;
        for (Map.Entry<String, PendingRow> entry : rowsById.entrySet()) {
            rows.set(i++, entry.getKey(), entry.getValue());
        }
        rowsById.clear();
        if (effectsAtCommit && effectTransaction == null) {
            throw new IllegalStateException("effectsBelongTo must name the transaction before its first rows");
        }
        String transaction = effectTransaction;
        if (effectsAtCommit) {
            return connection -> {
                checkConstraintsPerStatement(connection);
                writeIsolatingRefusedRows(connection, rows, (c, range) -> upsert(c, range, transaction), this::reject);
            };
        }
        return connection -> {
            if (insertNewSql != null && connection.getAutoCommit()) {
                PostgresConnections.inTransaction(connection, () -> write(connection, rows));
            } else {
                write(connection, rows);
            }
        };
    }

    private void write(Connection connection, Rows rows) throws SQLException {
        checkConstraintsPerStatement(connection);
        if (insertNewSql == null) {
            writeIsolatingRefusedRows(connection, rows, (c, range) -> upsert(c, range, null), this::reject);
        } else {
            writeThroughInbox(connection, rows);
        }
    }

    /** The three statements of a batch with an effect (see the class comment). */
    private void writeThroughInbox(Connection connection, Rows rows) throws SQLException {
        Set<String> inserted = new HashSet<>();
        Set<String> refused = new HashSet<>();
        writeIsolatingRefusedRows(connection, rows, (c, range) -> inserted.addAll(insertNew(c, range)),
                (c, row, refusal) -> {
                    reject(c, row, refusal);
                    refused.add(row.ids[0]);
                });
        writeIsolatingRefusedRows(connection, rows.select(id -> !inserted.contains(id) && !refused.contains(id)),
                this::addDeliveries, this::reject);
        Rows newRows = rows.select(inserted::contains);
        if (newRows.size() > 0) {
            effectCalls.serialize(connection);
            effectCalls.call(connection, newRows);
        }
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
    public interface Upsert {
        /** Runs in {@code connection}'s current transaction (or autocommit). */
        void executeOn(Connection connection) throws SQLException;
    }

    /** One statement over some rows of a batch. */
    @FunctionalInterface
    public interface RowsStatement {
        void execute(Connection connection, Rows rows) throws SQLException;
    }

    /** What becomes of a row that a {@link RowsStatement} failed on with a data error. */
    @FunctionalInterface
    public interface RefusedRow {
        void record(Connection connection, Rows row, SQLException refusal) throws SQLException;
    }

    /**
     * Executes {@code statement} on {@code rows} under a savepoint; on a data error, on each half,
     * until the rows it fails on stand alone and go to {@code refusedRow}.
     */
    public static void writeIsolatingRefusedRows(Connection connection, Rows rows, RowsStatement statement,
            RefusedRow refusedRow) throws SQLException {
        isolatingFailingRows(connection, rows, statement, EventUpsertBatch::isRowDataError, refusedRow);
    }

    /** As {@link #writeIsolatingRefusedRows}, splitting on the errors {@code aboutTheRows} accepts. */
    public static void isolatingFailingRows(Connection connection, Rows rows, RowsStatement statement,
            Predicate<SQLException> aboutTheRows, RefusedRow refusedRow) throws SQLException {
        if (rows.size() == 0) {
            return;
        }
        Savepoint savepoint = connection.getAutoCommit() ? null : connection.setSavepoint();
        try {
            statement.execute(connection, rows);
        } catch (SQLException e) {
            if (!aboutTheRows.test(e)) {
                throw e; // the transaction is aborted: the task fails and replays from the checkpoint
            }
            if (savepoint != null) {
                connection.rollback(savepoint);
            }
            if (rows.size() == 1) {
                refusedRow.record(connection, rows, e);
            } else {
                int middle = rows.size() / 2;
                isolatingFailingRows(connection, rows.range(0, middle), statement, aboutTheRows, refusedRow);
                isolatingFailingRows(connection, rows.range(middle, rows.size()), statement, aboutTheRows, refusedRow);
            }
            return;
        }
        if (savepoint != null) {
            connection.releaseSavepoint(savepoint);
        }
    }

    /** @param transaction the gid new rows are tagged with; null when they are not */
    private void upsert(Connection connection, Rows rows, String transaction) throws SQLException {
        try (PreparedStatement upsert = connection.prepareStatement(upsertSql)) {
            if (transaction == null) {
                bindRows(upsert, rows, 1);
            } else {
                upsert.setString(1, transaction);
                bindRows(upsert, rows, 2);
            }
            upsert.executeUpdate();
        }
    }

    /** @return the ids of {@code rows} that were not in the table yet */
    private List<String> insertNew(Connection connection, Rows rows) throws SQLException {
        List<String> inserted = new ArrayList<>(rows.size());
        try (PreparedStatement insert = connection.prepareStatement(insertNewSql)) {
            bindRows(insert, rows, 1);
            try (ResultSet returned = insert.executeQuery()) {
                while (returned.next()) {
                    inserted.add(returned.getString(1));
                }
            }
        }
        return inserted;
    }

    /** Binds the six column arrays of {@link #BATCH_ROWS} from parameter {@code first} on. */
    private static void bindRows(PreparedStatement statement, Rows rows, int first) throws SQLException {
        // pgjdbc's own createArrayOf takes primitive arrays too (no boxing).
        PgConnection pg = statement.getConnection().unwrap(PgConnection.class);
        statement.setArray(first, pg.createArrayOf("text", rows.ids));
        statement.setArray(first + 1, pg.createArrayOf("text", rows.payloads));
        statement.setArray(first + 2, pg.createArrayOf("text", rows.topics));
        statement.setArray(first + 3, pg.createArrayOf("int4", rows.partitions));
        statement.setArray(first + 4, pg.createArrayOf("int8", rows.offsets));
        statement.setArray(first + 5, pg.createArrayOf("int4", rows.deliveries));
    }

    private void addDeliveries(Connection connection, Rows rows) throws SQLException {
        PgConnection pg = connection.unwrap(PgConnection.class);
        try (PreparedStatement update = connection.prepareStatement(addDeliveriesSql)) {
            update.setArray(1, pg.createArrayOf("text", rows.ids));
            update.setArray(2, pg.createArrayOf("int4", rows.deliveries));
            update.executeUpdate();
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
        metrics.rowsRejected.inc();
        LOG.warn("PostgreSQL refused the row of message id '{}' ({}:{}@{}) with SQLSTATE {}: {}. It is recorded in the"
                + " rejects table instead of the event table.", rows.ids[only], rows.topics[only], rows.partitions[only],
                rows.offsets[only], refusal.getSQLState(), error);
    }

    /** The server's message and the constraint it names, without the DETAIL (which quotes the row). */
    public static String describe(SQLException refusal) {
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
    public static boolean isRowDataError(SQLException e) {
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
    public static final class Rows {
        public final String[] ids;
        final String[] payloads;
        final String[] topics;
        final int[] partitions;
        final long[] offsets;
        final int[] deliveries;

        /** Rows that only have their ids, e.g. to call the effect for rows already in the table. */
        public static Rows ofIds(List<String> ids) {
            Rows rows = new Rows(ids.size());
            for (int i = 0; i < rows.size(); i++) {
                rows.ids[i] = ids.get(i);
            }
            return rows;
        }

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

        public int size() {
            return ids.length;
        }

        /** The rows whose id passes {@code filter}, copied. */
        Rows select(Predicate<String> filter) {
            Rows selected = new Rows((int) Arrays.stream(ids).filter(filter).count());
            int to = 0;
            for (int from = 0; from < size(); from++) {
                if (filter.test(ids[from])) {
                    selected.copy(this, from, to++);
                }
            }
            return selected;
        }

        private void copy(Rows source, int from, int to) {
            ids[to] = source.ids[from];
            payloads[to] = source.payloads[from];
            topics[to] = source.topics[from];
            partitions[to] = source.partitions[from];
            offsets[to] = source.offsets[from];
            deliveries[to] = source.deliveries[from];
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
