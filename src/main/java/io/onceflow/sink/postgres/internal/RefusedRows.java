package io.onceflow.sink.postgres.internal;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Statement;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Writes rows so that the rows PostgreSQL refuses go to the rejects table instead of failing the
 * transaction on every replay. A row is refused with a data error ({@link
 * SqlStates#isRowDataError}: a value the column type cannot take, a user's CHECK or foreign key,
 * a trigger's exception); {@link RowIsolation} splits the rows until the refused ones stand alone,
 * and each is written to the rejects table with its SQLSTATE and message, in the same transaction as
 * the rows that went in, and counted. Other errors (lost connection, lock or statement timeout,
 * serialization failure, permissions) are not about one row: they fail the task, which replays from
 * the checkpoint.
 */
final class RefusedRows {
    private static final Logger LOG = LoggerFactory.getLogger(RefusedRows.class);

    private final String rejectSql;
    private final PostgresSinkMetrics metrics;

    RefusedRows(RejectsTable rejects, PostgresSinkMetrics metrics) {
        this.rejectSql = rejects.rejectStatement();
        this.metrics = metrics;
    }

    /**
     * A user's deferred constraint (a {@code DEFERRABLE INITIALLY DEFERRED} foreign key, a deferred
     * constraint trigger) would fire at {@code PREPARE TRANSACTION}, outside every batch's savepoint,
     * and fail the whole transaction on every replay. Checked at each statement instead, a refused
     * row is isolated like any other. Transaction-scoped, so set for each batch (one round trip).
     */
    static void checkConstraintsPerStatement(Connection connection) throws SQLException {
        if (!connection.getAutoCommit()) {
            try (Statement statement = connection.createStatement()) {
                statement.execute("SET CONSTRAINTS ALL IMMEDIATE");
            }
        }
    }

    /** Executes {@code statement} on {@code rows}; the rows it refuses go to the rejects table. */
    void write(Connection connection, Rows rows, RowIsolation.RowsStatement statement) throws SQLException {
        write(connection, rows, statement, this::reject);
    }

    /** As {@link #write(Connection, Rows, RowIsolation.RowsStatement)}, with {@code refused} recording each refused row. */
    void write(Connection connection, Rows rows, RowIsolation.RowsStatement statement, RowIsolation.FailingRow refused)
            throws SQLException {
        RowIsolation.isolatingFailingRows(connection, rows, statement, SqlStates::isRowDataError, refused);
    }

    /** Writes the only row of {@code rows} to the rejects table. */
    void reject(Connection connection, Rows rows, SQLException refusal) throws SQLException {
        final int only = 0;
        String error = RowIsolation.describe(refusal);
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
}
