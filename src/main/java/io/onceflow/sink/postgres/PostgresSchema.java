package io.onceflow.sink.postgres;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.List;

/**
 * The tables of the PostgreSQL sink and the server setting it needs.
 *
 * <ul>
 *   <li>The event table: one row per message id. A duplicate that escapes dedup (its id expired,
 *       or a replay from an old savepoint) never makes a second row; it raises {@code deliveries}.
 *   <li>The commit log: one row per committed transaction, written inside that transaction, so that
 *       after a restore the committer can tell a transaction that was already committed (logged, no
 *       longer prepared) from one that was lost (neither).
 *   <li>{@code max_prepared_transactions}: PostgreSQL's default of 0 forbids prepared transactions.
 * </ul>
 *
 * <p>DBAs who create the tables themselves can take the statements from {@link #ddl()}. The log
 * grows by one row per checkpoint and writer subtask; rows older than the oldest savepoint anyone
 * may restore can be deleted ({@code committed_at} says when the row was written).
 */
public final class PostgresSchema {
    /** Serialises concurrent creation by several subtasks; the value is arbitrary but fixed. */
    private static final long SCHEMA_LOCK_KEY = 0x6f6e6365666c6f77L; // "onceflow"

    private final String table;
    private final String commitLogTable;

    /**
     * @param table the event table, {@code table} or {@code schema.table}
     * @param commitLogTable the commit log table, same form
     * @throws IllegalArgumentException if a name is not a plain SQL identifier
     */
    public PostgresSchema(String table, String commitLogTable) {
        this.table = SqlIdentifiers.requireTableName("table", table);
        this.commitLogTable = SqlIdentifiers.requireTableName("commit log table", commitLogTable);
    }

    /** The {@code CREATE TABLE IF NOT EXISTS} statements, each ending with {@code ;}, for DBAs. */
    public String ddl() {
        return String.join("\n\n", createStatements().stream().map(sql -> sql + ";").toList()) + "\n";
    }

    private List<String> createStatements() {
        return List.of(
                "CREATE TABLE IF NOT EXISTS " + table + " (\n"
                        + "    id text PRIMARY KEY,\n"
                        + "    payload jsonb,\n"
                        + "    source_topic text,\n"
                        + "    source_partition int,\n"
                        + "    source_offset bigint,\n"
                        + "    first_processed_at timestamptz NOT NULL DEFAULT now(),\n"
                        + "    deliveries int NOT NULL DEFAULT 1\n"
                        + ")",
                "CREATE TABLE IF NOT EXISTS " + commitLogTable + " (\n"
                        + "    gid text PRIMARY KEY,\n"
                        + "    committed_at timestamptz NOT NULL DEFAULT clock_timestamp()\n"
                        + ")");
    }

    /**
     * Creates the tables that do not exist yet. Safe when several subtasks call it at once (a
     * transaction-scoped advisory lock serialises them), and needs no CREATE privilege when the
     * tables exist already.
     *
     * @param connection in autocommit mode; left in autocommit mode
     */
    public void createIfMissing(Connection connection) throws SQLException {
        if (tablesExist(connection)) {
            return;
        }
        connection.setAutoCommit(false);
        try (Statement statement = connection.createStatement()) {
            statement.execute("SELECT pg_advisory_xact_lock(" + SCHEMA_LOCK_KEY + ")");
            for (String sql : createStatements()) {
                statement.execute(sql);
            }
            connection.commit();
        } catch (SQLException e) {
            connection.rollback();
            throw e;
        } finally {
            connection.setAutoCommit(true);
        }
    }

    private boolean tablesExist(Connection connection) throws SQLException {
        try (PreparedStatement query = connection.prepareStatement(
                "SELECT to_regclass(?) IS NOT NULL AND to_regclass(?) IS NOT NULL")) {
            query.setString(1, table);
            query.setString(2, commitLogTable);
            try (ResultSet result = query.executeQuery()) {
                result.next();
                return result.getBoolean(1);
            }
        }
    }

    /**
     * Checks that the server lets the sink prepare enough transactions: per writer subtask, one
     * waiting for its checkpoint to complete and one being prepared for the next checkpoint.
     * Other jobs and concurrent checkpoints on the same server need more.
     *
     * @throws IllegalStateException saying how to raise the setting, if it is too low
     */
    public static void checkMaxPreparedTransactions(Connection connection, int parallelism) throws SQLException {
        int available;
        try (Statement statement = connection.createStatement();
                ResultSet result = statement.executeQuery("SHOW max_prepared_transactions")) {
            result.next();
            available = Integer.parseInt(result.getString(1));
        }
        int needed = 2 * parallelism;
        if (available < needed) {
            throw new IllegalStateException("PostgreSQL allows max_prepared_transactions = " + available
                    + " but the exactly-once sink with parallelism " + parallelism + " needs at least " + needed
                    + " (2 per writer subtask: one waiting for its checkpoint, one being prepared). Set"
                    + " max_prepared_transactions = " + needed + " or more in postgresql.conf (or run ALTER SYSTEM"
                    + " SET max_prepared_transactions = " + needed + ") and restart PostgreSQL: the setting only"
                    + " takes effect at server start. Count other jobs using the same server too.");
        }
    }

    String table() {
        return table;
    }

    String commitLogTable() {
        return commitLogTable;
    }
}
