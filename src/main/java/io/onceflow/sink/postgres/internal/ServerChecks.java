package io.onceflow.sink.postgres.internal;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.Optional;
import org.apache.flink.annotation.Internal;

/**
 * Internal. The server settings the sink needs: {@code max_prepared_transactions} (PostgreSQL's
 * default of 0 forbids prepared transactions) and {@code server_encoding} UTF8 (the events are JSON
 * text in UTF-8; another server encoding would refuse, or mangle, characters it cannot represent).
 */
@Internal
public final class ServerChecks {
    private ServerChecks() {}

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

    /**
     * Replicas of this server that a failover could promote while they are behind, what that risks
     * and the fix.
     *
     * @param found what streams from the server, naming the replicas (their application_name, and
     *     address when visible), without a final period
     * @param risk what a failover to one of them can do to the sink's transactions, and what prevents it
     * @param fix what to change on the server, ending with a period
     */
    public record ReplicationRisk(String found, String risk, String fix) {
        /** The warning the start logs when the risk is accepted. */
        public String warning() {
            return found + ". " + risk;
        }
    }

    private static final String RISK = "A failover to a replica that is behind can bring back a transaction whose"
            + " COMMIT PREPARED was acknowledged (the sink commits it again at the next start), or lose a PREPARE"
            + " of a completed checkpoint (reported as LOST: its input must be replayed), and lose what an"
            + " at-least-once sink committed. Synchronous replication (synchronous_standby_names naming the"
            + " replicas a failover may promote, and synchronous_commit = on or remote_apply) prevents both;"
            + " see docs/failover.md.";

    /**
     * Whether the server streams to replicas that a failover could promote while they are behind
     * ({@code pg_stat_replication}): replicas in {@code sync_state} {@code async} (or {@code
     * potential}), or synchronous ones that commits do not wait for ({@code synchronous_commit =
     * local} for the role or database; the sink's sessions raise {@code off} to {@code on}). Only a role with
     * {@code pg_monitor} (or {@code pg_read_all_stats}) sees the states; for others it says so.
     *
     * @return what it found, naming the replicas, what synchronous replication buys and the fix; empty
     *     if no replica streams from this server, or all are synchronous and waited for
     */
    public static Optional<ReplicationRisk> replicationRisk(Connection connection) throws SQLException {
        String name = "coalesce(application_name, '?') || coalesce(' at ' || host(client_addr), '')";
        try (PreparedStatement query = connection.prepareStatement("SELECT count(*),"
                + " count(*) FILTER (WHERE sync_state IN ('async', 'potential')),"
                + " count(*) FILTER (WHERE sync_state IS NULL), current_setting('synchronous_commit'),"
                + " current_setting('synchronous_standby_names'),"
                + " string_agg(" + name + ", ', ' ORDER BY application_name)"
                + "   FILTER (WHERE sync_state IN ('async', 'potential')),"
                + " string_agg(" + name + ", ', ' ORDER BY application_name),"
                + " string_agg(" + name + ", ', ' ORDER BY application_name) FILTER (WHERE sync_state IS NULL)"
                + " FROM pg_stat_replication");
                ResultSet row = query.executeQuery()) {
            row.next();
            long replicas = row.getLong(1);
            long async = row.getLong(2);
            long unknown = row.getLong(3);
            String commit = row.getString(4);
            String standbys = row.getString(5);
            String synchronousFix = "Make the replicas a failover may promote synchronous: name them in"
                    + " synchronous_standby_names (now '" + standbys + "') and keep synchronous_commit = on or"
                    + " remote_apply.";
            if (async > 0) {
                return Optional.of(new ReplicationRisk("the PostgreSQL server streams to " + async
                        + " asynchronous replica(s) of " + replicas + " (" + row.getString(6) + ")", RISK,
                        synchronousFix));
            }
            // the sink's sessions raise off to on (PostgresConnections), but keep a role's or database's local
            if (replicas > 0 && "local".equals(commit)) {
                return Optional.of(new ReplicationRisk("the PostgreSQL server streams to " + replicas + " replica(s),"
                        + " but synchronous_commit = " + commit + " does not wait for them (" + row.getString(7)
                        + "; synchronous_standby_names = '" + standbys + "')", RISK,
                        "Set synchronous_commit = on or remote_apply for the sink's role and database"
                                + " (ALTER ROLE ... RESET synchronous_commit)."));
            }
            if (unknown > 0) {
                return Optional.of(new ReplicationRisk("the PostgreSQL server streams to " + unknown + " replica(s)"
                        + " whose replication state this role may not see (" + row.getString(8) + "; grant it"
                        + " pg_monitor to check)", RISK, "GRANT pg_monitor (or pg_read_all_stats) to the sink's user so that"
                                + " the start can see that they are synchronous, or make them synchronous."));
            }
            return Optional.empty();
        }
    }

    /**
     * {@link #replicationRisk} as one warning line.
     *
     * @return a warning naming what it found and what synchronous replication buys; empty if no
     *     replica streams from this server, or all are synchronous and waited for
     */
    public static Optional<String> replicationWarning(Connection connection) throws SQLException {
        return replicationRisk(connection).map(ReplicationRisk::warning);
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
}
