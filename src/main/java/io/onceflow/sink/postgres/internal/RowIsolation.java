package io.onceflow.sink.postgres.internal;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Savepoint;
import java.util.function.Predicate;
import org.apache.flink.annotation.Internal;
import org.postgresql.util.PSQLException;
import org.postgresql.util.ServerErrorMessage;

/**
 * Internal. Runs one statement over rows so that an error about some of the rows costs only those
 * rows: no input may stop the job, and a statement that fails on one row's data would otherwise
 * fail the transaction on every replay. The statement runs under a savepoint (inside a
 * transaction; in autocommit a failed statement affects nothing else). When it fails with an error
 * about the rows, it is rolled back to the savepoint and run on each half, recursively, until the
 * failing rows stand alone, and each goes to a handler. Other errors are not about one row: they
 * fail the task, which replays from the checkpoint.
 *
 * <p>One loop for both uses: the rows the database refuses ({@link RefusedRows}, to the rejects
 * table) and the messages an effect fails on ({@link EffectCalls}, a failed result).
 *
 * <p>Savepoints are subtransactions: more than 64 batches in one checkpoint's transaction overflow
 * PostgreSQL's per-backend subtransaction cache (see docs/alerts.md, "Rows the database refuses").
 */
@Internal
public final class RowIsolation {
    private RowIsolation() {}

    /** One statement over some rows. */
    @FunctionalInterface
    public interface RowsStatement {
        void execute(Connection connection, Rows rows) throws SQLException;
    }

    /** What becomes of a row that a {@link RowsStatement} failed on with an error about the rows. */
    @FunctionalInterface
    public interface FailingRow {
        void record(Connection connection, Rows row, SQLException failure) throws SQLException;
    }

    /**
     * Executes {@code statement} on {@code rows} under a savepoint; on an error that {@code
     * aboutTheRows} accepts, on each half, until the rows it fails on stand alone and go to {@code
     * failingRow}.
     */
    public static void isolatingFailingRows(Connection connection, Rows rows, RowsStatement statement,
            Predicate<SQLException> aboutTheRows, FailingRow failingRow) throws SQLException {
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
                failingRow.record(connection, rows, e);
            } else {
                int middle = rows.size() / 2;
                isolatingFailingRows(connection, rows.range(0, middle), statement, aboutTheRows, failingRow);
                isolatingFailingRows(connection, rows.range(middle, rows.size()), statement, aboutTheRows, failingRow);
            }
            return;
        }
        if (savepoint != null) {
            connection.releaseSavepoint(savepoint);
        }
    }

    /** The server's message and the constraint it names, without the DETAIL (which quotes the row). */
    public static String describe(SQLException refusal) {
        ServerErrorMessage server = refusal instanceof PSQLException ? ((PSQLException) refusal).getServerErrorMessage() : null;
        if (server == null || server.getMessage() == null) {
            return String.valueOf(refusal.getMessage());
        }
        return server.getMessage() + (server.getConstraint() == null ? "" : " (constraint " + server.getConstraint() + ")");
    }
}
