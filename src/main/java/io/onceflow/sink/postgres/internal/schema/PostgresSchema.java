package io.onceflow.sink.postgres.internal.schema;

import io.onceflow.sink.postgres.EffectFunction;
import io.onceflow.sink.postgres.internal.PostgresConnections;
import io.onceflow.sink.postgres.internal.commit.PendingEffects;
import io.onceflow.sink.postgres.internal.fencing.WriterFence;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * The tables of the PostgreSQL sink and the server settings it needs.
 *
 * <ul>
 *   <li>The event table: one row per message id. A duplicate that escapes dedup (its id expired,
 *       or a replay from an old savepoint) never makes a second row; it raises {@code deliveries}.
 *       With an {@link EffectFunction} it is the inbox, and {@code result} holds the effect's result.
 *   <li>The rejects table: one row per message id that the database refused (a number or text the
 *       column type cannot take, a user's CHECK constraint, a trigger's exception), with the
 *       SQLSTATE and message, written in the same transaction as the rows that were accepted, so it
 *       is exactly-once too. Nothing is dropped silently: the audit counts these rows.
 *   <li>The commit log: one row per committed transaction, written inside that transaction, so that
 *       after a restore the committer can tell a transaction that was already committed (logged, no
 *       longer prepared) from one that was lost (neither).
 *   <li>The runs table: one row per start of a job with a sink prefix (a submission, not a
 *       failover restart). The newest run owns the prefix; writers of older runs are zombies.
 *   <li>The writers table: per sink prefix and subtask index, which attempt of which run holds it
 *       (see {@link WriterFence}).
 *   <li>{@code max_prepared_transactions}: PostgreSQL's default of 0 forbids prepared transactions.
 *   <li>{@code server_encoding} UTF8: the events are JSON text in UTF-8; another server encoding
 *       would refuse (or worse, mangle) characters it cannot represent.
 * </ul>
 *
 * <p>DBAs who create the tables themselves can take the statements from {@link #ddl()}. The commit
 * log grows by one row per checkpoint and writer subtask, the runs table by one row per submission;
 * rows older than the oldest savepoint anyone may restore can be deleted.
 */
public final class PostgresSchema {
    /** Serialises concurrent creation by several subtasks; the value is arbitrary but fixed. */
    private static final long SCHEMA_LOCK_KEY = 0x6f6e6365666c6f77L; // "onceflow"

    private final String table;
    private final String rejectsTable;
    private final String commitLogTable;
    private final String runsTable;
    private final String writersTable;
    /** Null without an effect. */
    private final String effectFunction;

    /**
     * Each name is {@code table} or {@code schema.table}.
     *
     * @throws IllegalArgumentException if a name is not a plain SQL identifier, or two name the same
     *     table
     */
    public PostgresSchema(String table, String rejectsTable, String commitLogTable, String runsTable,
            String writersTable) {
        this(table, rejectsTable, commitLogTable, runsTable, writersTable, null);
    }

    private PostgresSchema(String table, String rejectsTable, String commitLogTable, String runsTable,
            String writersTable, String effectFunction) {
        this.effectFunction = effectFunction == null ? null
                : SqlIdentifiers.requireFunctionName("effect function", effectFunction);
        this.table = SqlIdentifiers.requireTableName("table", table);
        this.rejectsTable = SqlIdentifiers.requireTableName("rejects table", rejectsTable);
        this.commitLogTable = SqlIdentifiers.requireTableName("commit log table", commitLogTable);
        this.runsTable = SqlIdentifiers.requireTableName("runs table", runsTable);
        this.writersTable = SqlIdentifiers.requireTableName("writers table", writersTable);
        String clash = sameTableProblem(List.of(table, rejectsTable, commitLogTable, runsTable, writersTable));
        if (clash != null) {
            throw new IllegalArgumentException(clash);
        }
    }

    /**
     * These tables for a sink that calls {@code effectFunction} ({@code name} or {@code schema.name};
     * null for none): {@link #prepare} also makes sure the events table has the {@code result}
     * column and checks the function.
     */
    public PostgresSchema withEffectFunction(String effectFunction) {
        return new PostgresSchema(table, rejectsTable, commitLogTable, runsTable, writersTable, effectFunction);
    }

    /**
     * Unquoted identifiers fold to lower case, so {@code Events} and {@code events} are one table.
     *
     * @return a message naming the first name used twice, or null
     */
    public static String sameTableProblem(List<String> names) {
        Set<String> seen = new LinkedHashSet<>();
        for (String name : names) {
            if (name != null && !seen.add(name.toLowerCase(Locale.ROOT))) {
                return "table name '" + name + "' is used for two of the sink's tables (events, rejects, commit log,"
                        + " runs, writers): give each its own";
            }
        }
        return null;
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
                        + "    deliveries int NOT NULL DEFAULT 1,\n"
                        + "    result jsonb,\n"
                        + "    effect_transaction text\n"
                        + ")",
                createPendingEffectsIndexStatement(),
                // Payload as text: the database refused the row, perhaps its payload as jsonb. Keyed by
                // a hash of the id: the id itself may be what the event table's index refused.
                "CREATE TABLE IF NOT EXISTS " + rejectsTable + " (\n"
                        + "    id_hash uuid GENERATED ALWAYS AS (md5(id)::uuid) STORED PRIMARY KEY,\n"
                        + "    id text NOT NULL,\n"
                        + "    payload text,\n"
                        + "    source_topic text,\n"
                        + "    source_partition int,\n"
                        + "    source_offset bigint,\n"
                        + "    sql_state text NOT NULL,\n"
                        + "    error text NOT NULL,\n"
                        + "    first_rejected_at timestamptz NOT NULL DEFAULT now(),\n"
                        + "    deliveries int NOT NULL DEFAULT 1\n"
                        + ")",
                "CREATE TABLE IF NOT EXISTS " + commitLogTable + " (\n"
                        + "    gid text PRIMARY KEY,\n"
                        + "    committed_at timestamptz NOT NULL DEFAULT clock_timestamp()\n"
                        + ")",
                "CREATE TABLE IF NOT EXISTS " + runsTable + " (\n"
                        + "    sink_prefix text NOT NULL,\n"
                        + "    run bigint NOT NULL,\n"
                        + "    job_name text NOT NULL,\n"
                        + "    start_mode text NOT NULL,\n"
                        + "    registered_at timestamptz NOT NULL DEFAULT clock_timestamp(),\n"
                        + "    registered_from text,\n"
                        + "    flink_job_id text,\n"
                        + "    PRIMARY KEY (sink_prefix, run)\n"
                        + ")",
                "CREATE TABLE IF NOT EXISTS " + writersTable + " (\n"
                        + "    sink_prefix text NOT NULL,\n"
                        + "    subtask_index int NOT NULL,\n"
                        + "    run bigint NOT NULL,\n"
                        + "    restored_checkpoint bigint,\n"
                        + "    claimed_by_subtask int NOT NULL,\n"
                        + "    attempt int NOT NULL,\n"
                        + "    epoch bigint NOT NULL,\n"
                        + "    job_id text NOT NULL,\n"
                        + "    claimed_at timestamptz NOT NULL DEFAULT clock_timestamp(),\n"
                        + "    PRIMARY KEY (sink_prefix, subtask_index)\n"
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
        PostgresConnections.inTransaction(connection, () -> {
            try (Statement statement = connection.createStatement()) {
                lockSchema(statement);
                for (String sql : createStatements()) {
                    statement.execute(sql);
                }
            }
        });
    }

    private static void lockSchema(Statement statement) throws SQLException {
        statement.execute("SELECT pg_advisory_xact_lock(" + SCHEMA_LOCK_KEY + ")");
    }

    /**
     * What a sink does before it writes: {@link #createIfMissing}, and with an effect function,
     * adds the {@code result} column to an events table from before the effect (as
     * {@link #createIfMissing} does, under a lock that serialises subtasks) and checks that the
     * function can be called ({@link EffectFunction#problem}).
     *
     * @param connection in autocommit mode; left in autocommit mode
     * @throws IllegalStateException naming the fix, if the column cannot be added or the function
     *     cannot be called
     */
    public void prepare(Connection connection) throws SQLException {
        createIfMissing(connection);
        if (columnType(connection, runsTable, "flink_job_id") == null) {
            addRunsJobIdColumn(connection);
        }
        if (effectFunction == null) {
            return;
        }
        if (columnType(connection, table, "result") == null) {
            addResultColumn(connection);
        }
        String type = columnType(connection, table, "result");
        if (!"jsonb".equals(type)) {
            throw new IllegalStateException("the column result of " + table + " has the type " + type + ", but the"
                    + " effect function (postgres.effect.function) stores its jsonb results there: rename that"
                    + " column, then start again (the sink adds its own)");
        }
        EffectFunction.check(connection, effectFunction);
    }

    /** The statement that adds the effect's columns to an events table created before it. */
    public String addResultColumnStatement() {
        return "ALTER TABLE " + table + " ADD COLUMN IF NOT EXISTS result jsonb,"
                + " ADD COLUMN IF NOT EXISTS effect_transaction text";
    }

    /**
     * The rows whose effect is still to be called, by the transaction that inserted them
     * ({@code PendingEffects}): small, as a row leaves it when its result is stored.
     */
    private String createPendingEffectsIndexStatement() {
        String unqualified = table.substring(table.indexOf('.') + 1);
        return "CREATE INDEX IF NOT EXISTS " + unqualified + "_pending_effects ON " + table
                + " (effect_transaction) WHERE result IS NULL AND effect_transaction IS NOT NULL";
    }

    private void addResultColumn(Connection connection) throws SQLException {
        try {
            PostgresConnections.inTransaction(connection, () -> {
                try (Statement statement = connection.createStatement()) {
                    lockSchema(statement);
                    // ALTER TABLE locks the table exclusively even when the column exists: check again
                    if (columnType(connection, table, "result") == null) {
                        statement.execute(addResultColumnStatement());
                        statement.execute(createPendingEffectsIndexStatement());
                    }
                }
            });
        } catch (SQLException e) {
            String cause = "42501".equals(e.getSQLState()) ? "the user may not alter it (only its owner may)"
                    : "55P03".equals(e.getSQLState()) ? "another session or a prepared transaction (of a checkpoint"
                            + " of an earlier run, waiting for its commit) holds a lock on it"
                    : null;
            if (cause == null) {
                throw e;
            }
            throw new IllegalStateException("the table " + table + " has no result column, which the effect function"
                    + " (postgres.effect.function) needs, and the sink could not add it: " + cause + " ("
                    + e.getMessage() + "). Have the table's owner run " + addResultColumnStatement() + "; "
                    + createPendingEffectsIndexStatement() + "; (it"
                    + " waits for the job's prepared transactions, see pg_prepared_xacts), then start the job again.",
                    e);
        }
    }

    /**
     * A runs table of an earlier version has no {@code flink_job_id} column, which a second execution
     * of a job's {@code main} finds its run by.
     */
    private void addRunsJobIdColumn(Connection connection) throws SQLException {
        String alter = "ALTER TABLE " + runsTable + " ADD COLUMN IF NOT EXISTS flink_job_id text";
        try {
            PostgresConnections.inTransaction(connection, () -> {
                try (Statement statement = connection.createStatement()) {
                    lockSchema(statement);
                    if (columnType(connection, runsTable, "flink_job_id") == null) {
                        statement.execute(alter);
                    }
                }
            });
        } catch (SQLException e) {
            if (!"42501".equals(e.getSQLState())) {
                throw e;
            }
            throw new IllegalStateException("the table " + runsTable + " of an earlier version has no flink_job_id"
                    + " column, and the user may not add it (only the table's owner may): have the owner run " + alter
                    + "; then start the job again (" + e.getMessage() + ")", e);
        }
    }

    /** The type of {@code table}'s {@code column}, or null if it has none. */
    private static String columnType(Connection connection, String table, String column) throws SQLException {
        try (PreparedStatement query = connection.prepareStatement("SELECT format_type(atttypid, atttypmod)"
                + " FROM pg_attribute WHERE attrelid = to_regclass(?) AND attname = ? AND NOT attisdropped")) {
            query.setString(1, table);
            query.setString(2, column);
            try (ResultSet type = query.executeQuery()) {
                return type.next() ? type.getString(1) : null;
            }
        }
    }

    private boolean tablesExist(Connection connection) throws SQLException {
        List<String> tables = tables();
        StringBuilder sql = new StringBuilder("SELECT true");
        for (int i = 0; i < tables.size(); i++) {
            sql.append(" AND to_regclass(?) IS NOT NULL");
        }
        try (PreparedStatement query = connection.prepareStatement(sql.toString())) {
            for (int i = 0; i < tables.size(); i++) {
                query.setString(i + 1, tables.get(i));
            }
            try (ResultSet result = query.executeQuery()) {
                result.next();
                return result.getBoolean(1);
            }
        }
    }

    private List<String> tables() {
        return List.of(table, rejectsTable, commitLogTable, runsTable, writersTable);
    }

    /**
     * How many prepared transactions one exactly-once job can have waiting at once: per writer
     * subtask, one for each checkpoint that may fail in a row without failing the job (their
     * transactions wait for the next completed checkpoint), one for the checkpoint that completes
     * and one being prepared for the next.
     */
    public static int preparedTransactionsNeeded(int parallelism, int tolerableCheckpointFailures) {
        return (tolerableCheckpointFailures + 2) * parallelism;
    }

    /**
     * Checks that the server lets the sink prepare enough transactions (see
     * {@link #preparedTransactionsNeeded}). Other jobs on the same server need more.
     *
     * @throws IllegalStateException saying how to raise the setting, if it is too low
     */
    public static void checkMaxPreparedTransactions(Connection connection, int parallelism,
            int tolerableCheckpointFailures) throws SQLException {
        int available = Integer.parseInt(setting(connection, "max_prepared_transactions"));
        int needed = preparedTransactionsNeeded(parallelism, tolerableCheckpointFailures);
        if (available < needed) {
            throw new IllegalStateException("PostgreSQL allows max_prepared_transactions = " + available
                    + " but the exactly-once sink with parallelism " + parallelism + " and " + tolerableCheckpointFailures
                    + " tolerated checkpoint failures needs at least " + needed + " ((" + tolerableCheckpointFailures
                    + " + 2) per writer subtask: one per tolerated failed checkpoint, one waiting for its checkpoint,"
                    + " one being prepared). Set max_prepared_transactions = " + needed + " or more in postgresql.conf"
                    + " (or run ALTER SYSTEM SET max_prepared_transactions = " + needed + ") and restart PostgreSQL:"
                    + " the setting only takes effect at server start. Count other jobs using the same server too.");
        }
    }

    /**
     * Checks that the server stores text as UTF-8.
     *
     * @throws IllegalStateException naming the encoding and the fix
     */
    public static void checkServerEncoding(Connection connection) throws SQLException {
        String encoding = setting(connection, "server_encoding");
        if (!"UTF8".equalsIgnoreCase(encoding)) {
            throw new IllegalStateException("the database's server_encoding is " + encoding + ", but onceflow writes"
                    + " UTF-8 JSON that " + encoding + " may not represent: create the database with"
                    + " ENCODING 'UTF8' (CREATE DATABASE ... TEMPLATE template0 ENCODING 'UTF8')");
        }
    }

    private static String setting(Connection connection, String name) throws SQLException {
        try (PreparedStatement query = connection.prepareStatement("SELECT current_setting(?)")) {
            query.setString(1, name);
            try (ResultSet result = query.executeQuery()) {
                result.next();
                return result.getString(1);
            }
        }
    }

    /** The names of the five tables, in DDL order, for messages and checks. */
    public List<String> tableNames() {
        return new ArrayList<>(tables());
    }

    public String table() {
        return table;
    }

    public String rejectsTable() {
        return rejectsTable;
    }

    public String commitLogTable() {
        return commitLogTable;
    }

    public String runsTable() {
        return runsTable;
    }

    public String writersTable() {
        return writersTable;
    }
}
