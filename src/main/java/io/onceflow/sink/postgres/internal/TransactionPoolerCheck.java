package io.onceflow.sink.postgres.internal;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.UUID;
import org.apache.flink.annotation.Internal;

/**
 * Internal. Refuses a connection that goes through a transaction-pooling proxy (PgBouncer's
 * {@code pool_mode = transaction}, and the like), which hands each transaction of a client to any
 * server session: a writer's advisory locks would sit on a session other clients use, and a zombie's
 * {@code ROLLBACK PREPARED} could run anywhere.
 *
 * <p>How: the checked connection A leaves a marker in its session (a session-level custom setting
 * with a random value) and notes its backend's pid. Then, up to {@code probes} times: a new
 * connection through the same URL opens a transaction and keeps it open (so the next probe cannot
 * get the same backend), and reports its backend's pid and marker; then A runs a transaction of its
 * own and reports the same. A probe that sees A's pid or marker, or an A that sees another pid or no
 * marker, means sessions are shared per transaction.
 *
 * <p>What it catches, assuming no other client uses the pooler meanwhile:
 * <ul>
 *   <li>Direct connections and session pooling never fail it: A keeps its session for life, and
 *       the probes have sessions of their own.
 *   <li>A LIFO pool (PgBouncer's default, {@code server_round_robin = 0}), of any size: A's backend
 *       is the one given back last, so the first probe gets it.
 *   <li>Any order, with at most {@code probes} server connections for this database and user: the
 *       probes each hold one, so A's is among them by the last probe at the latest (lazily opened
 *       server connections count only once open; a pooler prefers an idle one, which is A's).
 *   <li>A FIFO (round-robin) pool that is larger: A's next transaction gets the longest-idle backend,
 *       which is not A's unless the probes' own statements happened to rotate it back; usually caught
 *       at the first or second step, but not certainly.
 *   <li>A pooler that resets a session when it changes hands ({@code DISCARD ALL}): A finds its
 *       marker gone.
 * </ul>
 * What it cannot catch: a pooler with more server connections than probes that keeps giving A its
 * own backend back (an unlucky round-robin rotation, or one that prefers a client's previous
 * server), or other clients' traffic that happens to do the same. A writer still refuses at its
 * first PREPARE when its commit-log row is written from a session other than its own (the commit
 * log's insert checks the pid).
 *
 * <p>Other clients' traffic through the same pooler can only add catches (they take A's backend, or
 * give A another), except in the case above. If every server connection is busy, a probe waits for
 * one as any client would (PgBouncer's {@code query_wait_timeout}, or the socket timeout).
 */
@Internal
public final class TransactionPoolerCheck {
    /**
     * At a run's start, once per submission: pools of up to 4 server connections are caught in any
     * order. Measured against the test proxy: LIFO and FIFO pools of 1 to 40 connections all caught;
     * about 120-150 ms against a direct server on a busy 2-core machine (4 connections opened).
     */
    public static final int RUN_START_PROBES = 4;
    /**
     * At each writer start, where a TaskManager's route to the database may differ from main's:
     * catches LIFO pools of any size and pools of one connection; of FIFO pools of 1 to 40 the
     * test proxy's of 2 and 7 connections got through. About 25-30 ms (one connection opened).
     */
    public static final int WRITER_START_PROBES = 1;
    private static final String MARKER = "onceflow.session_probe";
    private static final String MARK = "SELECT pg_backend_pid(), set_config('" + MARKER + "', ?, false)";
    private static final String READ = "SELECT pg_backend_pid(), current_setting('" + MARKER + "', true)";

    private TransactionPoolerCheck() {}

    /** Opens a further connection through the same URL, as the checked one was opened. */
    @FunctionalInterface
    public interface Connections {
        Connection open() throws SQLException;
    }

    /**
     * @param connection in autocommit mode; its marker is cleared afterwards
     * @throws IllegalStateException with {@link SinkRuns#transactionPoolingMessage()} if sessions are
     *     shared per transaction
     */
    public static void requireOwnSession(Connection connection, Connections connections, int probes)
            throws SQLException {
        String marker = UUID.randomUUID().toString();
        Session own = session(connection, MARK, marker);
        List<Connection> opened = new ArrayList<>();
        Throwable failure = null;
        try {
            for (int i = 0; i < probes; i++) {
                Connection probe = connections.open();
                opened.add(probe);
                probe.setAutoCommit(false); // its transaction keeps its backend from the next probe
                Session other = session(probe, READ, null);
                if (other.pid == own.pid || marker.equals(other.marker)) {
                    throw new IllegalStateException(SinkRuns.transactionPoolingMessage());
                }
                if (!own.equals(session(connection, READ, null))) {
                    throw new IllegalStateException(SinkRuns.transactionPoolingMessage());
                }
            }
        } catch (SQLException | RuntimeException e) {
            failure = e;
            throw e;
        } finally {
            cleanUp(connection, opened, failure);
        }
    }

    /**
     * Gives the probes' backends back (rollback, close) and clears A's marker; a failure there
     * only adds to {@code failure}. A probe that cannot be closed cleanly is gone anyway.
     */
    private static void cleanUp(Connection connection, List<Connection> probes, Throwable failure) throws SQLException {
        for (Connection probe : probes) {
            try (probe) {
                probe.rollback();
            } catch (SQLException e) {
                if (failure != null) {
                    failure.addSuppressed(e);
                }
            }
        }
        try {
            session(connection, MARK, "");
        } catch (SQLException e) {
            if (failure == null) {
                throw e;
            }
            failure.addSuppressed(e);
        }
    }

    private record Session(int pid, String marker) {}

    private static Session session(Connection connection, String sql, String marker) throws SQLException {
        try (PreparedStatement query = connection.prepareStatement(sql)) {
            if (marker != null) {
                query.setString(1, marker);
            }
            try (ResultSet row = query.executeQuery()) {
                row.next();
                return new Session(row.getInt(1), Objects.requireNonNullElse(row.getString(2), ""));
            }
        }
    }
}
