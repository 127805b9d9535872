package io.onceflow.sink.postgres.internal;

import io.onceflow.sink.postgres.options.PostgresTableOptions;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import org.apache.flink.annotation.Internal;

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
 *       (see {@link WriterClaim}).
 *   <li>{@code max_prepared_transactions}: PostgreSQL's default of 0 forbids prepared transactions.
 *   <li>{@code server_encoding} UTF8: the events are JSON text in UTF-8; another server encoding
 *       would refuse (or worse, mangle) characters it cannot represent.
 * </ul>
 *
 * <p>DBAs who create the tables themselves can take the statements from {@link #ddl()}. The commit
 * log grows by one row per checkpoint and writer subtask, the runs table by one row per submission;
 * rows older than the oldest savepoint anyone may restore can be deleted.
 */
@Internal
public final class PostgresSchema {
    /** Serialises concurrent creation by several subtasks; the value is arbitrary but fixed. */
    private static final long SCHEMA_LOCK_KEY = 0x6f6e6365666c6f77L; // "onceflow"

    private final EventsTable events;
    private final RejectsTable rejects;
    private final CommitLogTable commitLog;
    private final RunsTable runs;
    private final WritersTable writers;
    /** Null without an effect. */
    private final String effectFunction;
    /** Null without effect keys. */
    private final String effectKeys;
    /** The sink that queues and applies this schema's effects; null for a schema only created or read. */
    private final String sinkPrefix;

    /**
     * @throws IllegalArgumentException if a name is not a plain SQL identifier, or two name the same
     *     table
     */
    public PostgresSchema(PostgresTableOptions tables) {
        this(tables, null);
    }

    /**
     * As {@link #PostgresSchema(PostgresTableOptions)}, for the sink of {@code sinkPrefix}, which
     * {@link #prepare} binds the effect queue to.
     */
    public PostgresSchema(PostgresTableOptions tables, String sinkPrefix) {
        tables.validated();
        this.events = new EventsTable(tables.events());
        this.rejects = new RejectsTable(tables.rejects());
        this.commitLog = new CommitLogTable(tables.commitLog());
        this.runs = new RunsTable(tables.runs());
        this.writers = new WritersTable(tables.writers());
        this.effectFunction = tables.effectFunction();
        this.effectKeys = tables.effectKeys();
        this.sinkPrefix = sinkPrefix;
    }

    /** The tables of these names, without an effect; as {@link #PostgresSchema(PostgresTableOptions)}. */
    public PostgresSchema(String table, String rejectsTable, String commitLogTable, String runsTable,
            String writersTable) {
        this(new PostgresTableOptions(table, rejectsTable, commitLogTable, runsTable, writersTable, null, null,
                false));
    }

    /** The {@code CREATE TABLE IF NOT EXISTS} statements, each ending with {@code ;}, for DBAs. */
    public String ddl() {
        List<String> statements = new ArrayList<>(createStatements());
        statements.add(2, events.queue().createPartitionOrderIndexStatement());
        return String.join("\n\n", statements.stream().map(sql -> sql + ";").toList()) + "\n";
    }

    private List<String> createStatements() {
        return List.of(events.createStatement(), events.queue().createStatement(), events.queue().log().createStatement(),
                events.outcomes().createStatement(), rejects.createStatement(), commitLog.createStatement(),
                runs.createStatement(), writers.createStatement());
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
                // a queue of an earlier version may lack the index's columns: the upgrade adds both
                boolean newQueue = !EffectQueueStartChecks.exists(connection, events.queue().name());
                for (String sql : createStatements()) {
                    statement.execute(sql);
                }
                if (newQueue) {
                    statement.execute(events.queue().createPartitionOrderIndexStatement());
                }
            }
        });
    }

    static void lockSchema(Statement statement) throws SQLException {
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
        for (String column : RunsTable.addedColumns()) {
            if (columnType(connection, runs.name(), column) == null) {
                addRunsColumn(connection, column);
            }
        }
        if (effectFunction == null) {
            EffectQueueStartChecks.refuseStrandedEffects(connection, events.queue());
            return;
        }
        if (sinkPrefix == null) {
            throw new IllegalStateException("an effect function (postgres.effect.function) needs the sink's prefix"
                    + " (postgres.sink.prefix): the queued effects are bound to it");
        }
        if (columnType(connection, events.name(), EventsTable.RESULT_COLUMN) == null) {
            addResultColumn(connection);
        }
        EffectQueueBinding.upgradeIfNeeded(connection, events.queue());
        EffectQueueStartChecks.migrateLegacyPendingIndex(connection, events, sinkPrefix, effectFunction);
        String type = columnType(connection, events.name(), EventsTable.RESULT_COLUMN);
        if (!"jsonb".equals(type)) {
            throw new IllegalStateException("the column result of " + events.name() + " has the type " + type + ", but the"
                    + " effect function (postgres.effect.function) stores its jsonb results there: rename that"
                    + " column, then start again (the sink adds its own)");
        }
        EffectFunction.check(connection, effectFunction, effectKeys);
    }

    /**
     * What a run's start does before the job runs: {@link #prepare}, and with an effect function,
     * refuses effects queued by another sink or for another function ({@link EffectQueueBinding}).
     * Not a writer's (re)start: a sink's prefix and function cannot change within a run, and another
     * sink that started meanwhile must not stop this one (its effects are not this one's to apply).
     *
     * @param connection in autocommit mode; left in autocommit mode
     * @throws IllegalStateException naming the fix, as {@link #prepare} and {@link EffectQueueBinding}
     */
    public void prepareRunStart(Connection connection) throws SQLException {
        prepareRunStart(connection, true);
    }

    /**
     * As {@link #prepareRunStart(Connection)}, for a run that a JobManager failover continues: another
     * sink's queued effects do not refuse it (that sink started on an empty queue while this run ran).
     */
    public void prepareContinuedRun(Connection connection) throws SQLException {
        prepareRunStart(connection, false);
    }

    private void prepareRunStart(Connection connection, boolean refuseOtherSinks) throws SQLException {
        prepare(connection);
        if (effectFunction != null) {
            EffectQueueBinding.requireOwnEffectsOnly(connection, events.queue(), events.name(), sinkPrefix,
                    effectFunction, refuseOtherSinks);
        }
    }

    private void addResultColumn(Connection connection) throws SQLException {
        try {
            PostgresConnections.inTransaction(connection, () -> {
                try (Statement statement = connection.createStatement()) {
                    lockSchema(statement);
                    // ALTER TABLE locks the table exclusively even when the column exists: check again
                    if (columnType(connection, events.name(), EventsTable.RESULT_COLUMN) == null) {
                        statement.execute(events.addResultColumnStatement());
                    }
                }
            });
        } catch (SQLException e) {
            String cause = SqlStates.is(e, SqlStates.INSUFFICIENT_PRIVILEGE) ? "the user may not alter it (only its owner may)"
                    : SqlStates.is(e, SqlStates.LOCK_NOT_AVAILABLE) ? "another session or a prepared transaction (of a checkpoint"
                            + " of an earlier run, waiting for its commit) holds a lock on it"
                    : null;
            if (cause == null) {
                throw e;
            }
            throw new IllegalStateException("the table " + events.name() + " has no result column, which the effect function"
                    + " (postgres.effect.function) needs, and the sink could not add it: " + cause + " ("
                    + e.getMessage() + "). Have the table's owner run " + events.addResultColumnStatement() + "; (it"
                    + " waits for the job's prepared transactions, see pg_prepared_xacts), then start the job again.",
                    e);
        }
    }

    /**
     * A runs table of an earlier version lacks a column of {@link RunsTable#addedColumns()}: the
     * Flink job id a second execution of a job's {@code main} finds its run by, or the server identity.
     */
    private void addRunsColumn(Connection connection, String column) throws SQLException {
        String alter = runs.addColumnStatement(column);
        try {
            PostgresConnections.inTransaction(connection, () -> {
                try (Statement statement = connection.createStatement()) {
                    lockSchema(statement);
                    if (columnType(connection, runs.name(), column) == null) {
                        statement.execute(alter);
                    }
                }
            });
        } catch (SQLException e) {
            if (!SqlStates.is(e, SqlStates.INSUFFICIENT_PRIVILEGE)) {
                throw e;
            }
            throw new IllegalStateException("the table " + runs.name() + " of an earlier version has no "
                    + column + " column, and the user may not add it (only the table's owner may):"
                    + " have the owner run " + alter + "; then start the job again (" + e.getMessage() + ")", e);
        }
    }

    /** The type of {@code table}'s {@code column}, or null if it has none. */
    static String columnType(Connection connection, String table, String column) throws SQLException {
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
        return List.of(events.name(), events.queue().name(), events.queue().log().name(), events.outcomes().name(),
                rejects.name(),
                commitLog.name(), runs.name(), writers.name());
    }

    /** The names of the eight tables (the five, the events table's effect queue, effect log and outcomes), in DDL order. */
    public List<String> tableNames() {
        return new ArrayList<>(tables());
    }

    /** The events table (the inbox, with an effect). */
    public EventsTable events() {
        return events;
    }

    public RejectsTable rejects() {
        return rejects;
    }

    public CommitLogTable commitLog() {
        return commitLog;
    }

    public RunsTable runs() {
        return runs;
    }

    public WritersTable writers() {
        return writers;
    }
}
