package io.onceflow.sink.postgres.internal;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalInt;
import org.apache.flink.annotation.Internal;
import org.postgresql.core.BaseStatement;
import org.postgresql.core.QueryExecutor;

/**
 * Internal. The session-level advisory locks that say who may act on a sink prefix's subtask index:
 * {@code pg_advisory_lock(key(prefix), index)}, held by a writer on its one connection for its whole
 * life (see {@link WriterClaim}), and the sessions that hold them.
 */
@Internal
public final class AdvisoryLocks {
    /** pg_advisory_lock(int, int) shows as objsubid 2 in pg_locks. */
    private static final int TWO_KEY_ADVISORY_LOCK = 2;
    private static final String SESSION_COLUMNS = "SELECT a.pid, %s, a.application_name,"
            + " coalesce(host(a.client_addr), 'a local socket'), a.state,"
            + " extract(epoch FROM clock_timestamp() - a.state_change)";
    private static final String HOLDERS_SQL = String.format(SESSION_COLUMNS, "l.objid::bigint")
            + " FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
            + " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = " + TWO_KEY_ADVISORY_LOCK
            + " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            + " AND l.classid::bigint = ? AND (? OR l.objid::bigint = ?) AND l.pid <> pg_backend_pid()";

    private final Connection connection;
    private final String sinkPrefix;
    private final int lockKey;

    /** @param connection the writer's only connection, which holds its locks */
    AdvisoryLocks(Connection connection, String sinkPrefix) {
        this.connection = connection;
        this.sinkPrefix = sinkPrefix;
        this.lockKey = lockKey(sinkPrefix);
    }

    /** The advisory lock key of a prefix; String.hashCode is specified, so every JVM agrees. */
    public static int lockKey(String sinkPrefix) {
        return ("onceflow-writer:" + sinkPrefix).hashCode();
    }

    /**
     * The transaction-scoped lock that orders a prefix's run registrations after its effect batches:
     * a registration takes it exclusively before it inserts the new run, each effect batch shares it
     * before it reads the newest run ({@code EffectBatch}), so every batch of a replaced run commits
     * before the new run exists, or sees it. Advisory, so that neither needs more than its grants
     * (a row lock of the runs table would need UPDATE on it). A key of its own: the writers' index
     * locks are (prefix key, index).
     */
    static String runRegistrationLock(boolean shared) {
        return "pg_advisory_xact_lock" + (shared ? "_shared" : "") + "(?, 0)";
    }

    /** The key of {@link #runRegistrationLock}'s lock for a prefix. */
    static int runRegistrationLockKey(String sinkPrefix) {
        return ("onceflow-runs:" + sinkPrefix).hashCode();
    }

    /** This prefix's lock key. */
    int lockKey() {
        return lockKey;
    }

    /** Blocks until the lock is free (the terminated holder gone), within lock_timeout. */
    void lock(int index) throws SQLException {
        try (PreparedStatement lock = connection.prepareStatement("SELECT pg_advisory_lock(?, ?)")) {
            lock.setInt(1, lockKey);
            lock.setInt(2, index);
            lock.executeQuery().close();
        }
    }

    /**
     * Refuses unless the server session that runs this statement holds the index's lock: through a
     * transaction-pooling proxy, consecutive statements of one connection run in different sessions,
     * so the lock would not fence anything. Checked before any recovery action, FIFO pools included.
     */
    void requireHeldHere(int index) throws SQLException {
        try (PreparedStatement held = connection.prepareStatement("SELECT EXISTS (SELECT 1 FROM pg_locks"
                + " WHERE locktype = 'advisory' AND granted AND objsubid = " + TWO_KEY_ADVISORY_LOCK
                + " AND pid = pg_backend_pid() AND classid::bigint = ? AND objid::bigint = ?"
                + " AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))")) {
            held.setLong(1, Integer.toUnsignedLong(lockKey));
            held.setLong(2, index);
            try (ResultSet result = held.executeQuery()) {
                result.next();
                if (!result.getBoolean(1)) {
                    throw new SQLException(SinkRuns.transactionPoolingMessage(), "08000");
                }
            }
        }
    }

    void unlock(int index) throws SQLException {
        try (PreparedStatement unlock = connection.prepareStatement("SELECT pg_advisory_unlock(?, ?)")) {
            unlock.setInt(1, lockKey);
            unlock.setInt(2, index);
            unlock.executeQuery().close();
        }
    }

    /** Releases every lock of the session, with a query that starts no transaction. */
    void releaseAll() throws SQLException {
        try (Statement statement = connection.createStatement()) {
            statement.unwrap(BaseStatement.class).executeWithFlags("SELECT pg_advisory_unlock_all()",
                    QueryExecutor.QUERY_SUPPRESS_BEGIN);
        }
    }

    /** The other sessions holding this prefix's lock of {@code index}. */
    List<LockHolder> holders(int index) throws SQLException {
        return holders(connection, sinkPrefix, OptionalInt.of(index));
    }

    /**
     * The sessions (other than this one) holding the prefix's lock of {@code index}, or of any
     * index when empty.
     */
    static List<LockHolder> holders(Connection connection, String sinkPrefix, OptionalInt index) throws SQLException {
        try (PreparedStatement query = connection.prepareStatement(HOLDERS_SQL)) {
            query.setLong(1, Integer.toUnsignedLong(lockKey(sinkPrefix))); // pg_locks shows keys as oids
            query.setBoolean(2, index.isEmpty());
            query.setLong(3, index.orElse(-1));
            return sessions(query);
        }
    }

    /**
     * The writer sessions of the prefix (other than this one), by {@code application_name}, whether
     * they hold a lock yet or not (a writer claims at its first checkpoint barrier); index -1.
     */
    static List<LockHolder> writerSessions(Connection connection, String sinkPrefix) throws SQLException {
        String writerName = PostgresConnections.applicationName(sinkPrefix, "writer-");
        try (PreparedStatement query = connection.prepareStatement(String.format(SESSION_COLUMNS, "-1")
                + " FROM pg_stat_activity a WHERE a.datname = current_database()"
                + " AND left(a.application_name, ?) = ? AND a.pid <> pg_backend_pid()")) {
            query.setInt(1, writerName.length());
            query.setString(2, writerName);
            return sessions(query);
        }
    }

    private static List<LockHolder> sessions(PreparedStatement query) throws SQLException {
        List<LockHolder> sessions = new ArrayList<>();
        try (ResultSet rows = query.executeQuery()) {
            while (rows.next()) {
                double idle = rows.getDouble(6);
                sessions.add(new LockHolder(rows.getInt(1), (int) rows.getLong(2), rows.getString(3),
                        rows.getString(4), rows.getString(5), rows.wasNull() ? null : idle));
            }
        }
        return sessions;
    }
}
