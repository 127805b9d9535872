package io.onceflow.sink.postgres.internal;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import org.apache.flink.annotation.Internal;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Internal. Which server a connection talks to, as far as the sink's transaction ids depend on it:
 * the cluster's {@code system_identifier} (set by initdb, kept by physical copies and replicas,
 * new after a logical restore into another cluster), the WAL timeline (grows at each promotion or
 * point-in-time recovery) and the transaction-id counter (the next xid it will issue). Transaction
 * ids, prepared transactions and acknowledged commits are only as durable as the server that holds
 * them: after a failover to a replica that was behind, they may come back, vanish or repeat.
 *
 * @param systemIdentifier null if the role may not read it (PUBLIC may, unless a DBA revoked it)
 * @param timeline the timeline of the current WAL insert position, which a promoted server has from
 *     its first record on (the last checkpoint's lags until the next checkpoint); null if unreadable
 * @param nextXid {@code pg_snapshot_xmax(pg_current_snapshot())}: no xid at or above it was issued
 */
@Internal
record ServerIdentity(Long systemIdentifier, Long timeline, long nextXid) {
    private static final Logger LOG = LoggerFactory.getLogger(ServerIdentity.class);
    private static final String SYSTEM_IDENTIFIER = "SELECT system_identifier FROM pg_control_system()";
    /** The first 8 hex digits of a WAL file name are its timeline. */
    private static final String TIMELINE =
            "SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint";
    private static final String NEXT_XID = "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint";

    /**
     * Reads the identity. A function the role may not execute, or that fails (a server in recovery
     * has no current WAL position), degrades to null with a warning: the checks that need it are
     * then skipped, never the start.
     *
     * @param connection in autocommit mode, so that a refused function aborts no transaction
     */
    public static ServerIdentity read(Connection connection) throws SQLException {
        return new ServerIdentity(optional(connection, SYSTEM_IDENTIFIER, "system_identifier"),
                optional(connection, TIMELINE, "timeline"), query(connection, NEXT_XID));
    }

    private static Long optional(Connection connection, String sql, String what) throws SQLException {
        try {
            return query(connection, sql);
        } catch (SQLException e) {
            if (SqlStates.isConnectionLost(e)) {
                throw e; // the connection broke: not a matter of privileges
            }
            LOG.warn("Cannot read the PostgreSQL server's {} ({}: {}): the sink cannot tell a failover to another"
                    + " server (or a replica that was behind) from this one. Grant EXECUTE on pg_control_system(),"
                    + " pg_walfile_name(pg_lsn) and pg_current_wal_lsn() to the job's role.", what, e.getSQLState(),
                    e.getMessage());
            return null;
        }
    }

    private static long query(Connection connection, String sql) throws SQLException {
        try (PreparedStatement query = connection.prepareStatement(sql); ResultSet result = query.executeQuery()) {
            result.next();
            return result.getLong(1);
        }
    }

    /**
     * The signs that this server is not the one {@code earlier} was read from, nor a copy of it that
     * has all it had: another system identifier (another cluster), a newer timeline (a promotion or a
     * point-in-time recovery), or a transaction-id counter behind {@code earlier}'s (transaction ids
     * it had issued are not issued here: a replica promoted while behind, a restored file-level copy).
     * Empty if none; an unknown identifier or timeline is no sign.
     *
     * @param earlierName what {@code earlier} is, for the signs' text (e.g. "run 1234")
     */
    public List<String> changesSince(ServerIdentity earlier, String earlierName) {
        List<String> signs = new ArrayList<>();
        if (nextXid < earlier.nextXid) {
            signs.add("its transaction-id counter (next xid " + nextXid + ") is behind " + earlierName + " (next xid "
                    + earlier.nextXid + ")");
        }
        if (earlier.systemIdentifier != null && systemIdentifier != null && !earlier.systemIdentifier.equals(systemIdentifier)) {
            signs.add("its system_identifier " + systemIdentifier + " is not " + earlier.systemIdentifier + ", "
                    + earlierName + "'s: another database cluster");
        }
        if (earlier.timeline != null && timeline != null && timeline > earlier.timeline) {
            signs.add("its timeline grew from " + earlier.timeline + " to " + timeline + " since " + earlierName
                    + ": a replica was promoted, or the server was recovered to a point in time");
        }
        return signs;
    }

    /** E.g. "system 7301..., timeline 2, next xid 1234". */
    @Override
    public String toString() {
        return "system " + (systemIdentifier == null ? "unknown" : systemIdentifier) + ", timeline "
                + (timeline == null ? "unknown" : timeline) + ", next xid " + nextXid;
    }
}
