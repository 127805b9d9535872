package io.onceflow.sink.postgres.internal;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Types;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;
import org.apache.flink.annotation.Internal;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Internal. Whether the server a writer or committer talks to is still the one its run was
 * registered on, as the runs table recorded it ({@link ServerIdentity}): after a failover to a
 * replica that was behind (asynchronous replication), or a restore of a file-level copy, the
 * transaction ids the sink compares (run ids, epochs, checkpoint horizons) no longer order what
 * happened, and a prepared transaction of a completed checkpoint may be back (its
 * {@code COMMIT PREPARED} was acknowledged but not replicated) or gone (its {@code PREPARE} was).
 *
 * <p>The signs, any of which counts: another system identifier (another cluster), a newer timeline
 * (a promotion or point-in-time recovery), a transaction-id counter behind the run's id (the run
 * was issued by a server ahead of this one), or behind the restored checkpoint's horizon (the
 * checkpoint saw transaction ids this server never issued). A restored copy of the same timeline
 * whose counter has already passed both goes unseen: synchronous replication is what prevents it.
 */
@Internal
public final class ServerChange {
    private static final Logger LOG = LoggerFactory.getLogger(ServerChange.class);

    private ServerChange() {}

    /**
     * For a writer at start, before its fence: detects a change, and when the run itself was lost
     * with it (registered after the point the server went back to), records the run again so that
     * the writer is not refused forever as a run "not in the runs table". Logs a warning for each.
     *
     * @param connection in autocommit mode
     * @return the signs of a change, empty if none: the writer then reconciles its prepared
     *     transactions by checkpoint id instead of trusting transaction ids
     */
    public static List<String> seenByWriter(Connection connection, PostgresSinkConfig config, String jobId,
            OptionalLong restoredCheckpointId, OptionalLong restoredHorizon, String writerName) throws SQLException {
        ServerIdentity server = ServerIdentity.read(connection);
        Recorded run = recorded(connection, config);
        List<String> signs = signs(run, config, server);
        if (restoredHorizon.isPresent() && restoredHorizon.getAsLong() > server.nextXid()) {
            signs.add("its transaction-id counter (next xid " + server.nextXid() + ") is behind restored checkpoint "
                    + restoredCheckpointId.orElse(-1) + ", which saw xid " + (restoredHorizon.getAsLong() - 1));
        }
        Optional<String> lostRun = run.exists() || !sameLineage(connection, config, server)
                ? Optional.empty() : lostWithTheServer(connection, config, server);
        lostRun.ifPresent(signs::add);
        if (signs.isEmpty()) {
            return signs;
        }
        LOG.warn("{}: the PostgreSQL server changed since run {} of sink prefix '{}' was registered ({}): {}. Its"
                + " transaction ids no longer order what happened: this writer commits the prepared transactions of"
                + " the checkpoints the restored state says completed (checkpoint id <= {}; none on a fresh start)"
                + " whose epoch is below the restored horizon, stops for an operator on those whose epoch is not,"
                + " and rolls back the later ones; a completed checkpoint whose PREPARE the server lost is reported"
                + " by the committer as LOST. Writers of this run reconcile so at every start; a new submission"
                + " records the new server (after a counter that went back: once it passes the newest run)."
                + " Use synchronous replication to avoid this (docs/failover.md).", writerName, config.run(),
                config.sinkPrefix(), server, String.join("; ", signs),
                restoredCheckpointId.isPresent() ? restoredCheckpointId.getAsLong() : "none");
        if (lostRun.isPresent()) {
            adopt(connection, config, server, jobId, writerName);
        }
        return signs;
    }

    /**
     * Why run {@code config.run()}, which this cluster's runs table does not record, was lost with a
     * change of server and may be adopted: the server has not issued its id yet, or every run
     * submitted is from a timeline before the server's (it was registered before a promotion). Empty
     * if neither, or if a run was submitted after a promotion ({@link #submittedAfterPromotion}): that
     * run replaced it.
     */
    private static Optional<String> lostWithTheServer(Connection connection, PostgresSinkConfig config,
            ServerIdentity server) throws SQLException {
        Timelines timelines = timelines(connection, config, server);
        if (timelines.submittedAfterPromotion(server).isPresent()) {
            return Optional.empty();
        }
        if (server.nextXid() <= config.run()) {
            return Optional.of("run " + config.run() + " is not in " + config.tables().runs() + " and this server has"
                    + " not issued its id yet: it was registered on a server ahead of this one");
        }
        if (server.timeline() != null && timelines.newest() != null && timelines.newest() < server.timeline()) {
            return Optional.of("run " + config.run() + " is not in " + config.tables().runs() + ", whose submitted"
                    + " runs on this cluster are all from timelines before this server's (" + server.timeline()
                    + "): it was registered before the promotion and lost with it");
        }
        return Optional.empty();
    }

    /**
     * The newest run submitted (not adopted) on {@code server}'s timeline, if the prefix also has runs
     * of an earlier timeline of this cluster: it was submitted after a promotion that the prefix
     * lived through, so it is newer than any run that the promotion lost, whatever their ids (the
     * promoted server's counter may be behind them). Empty if none, or if the timeline is unknown.
     */
    public static OptionalLong submittedAfterPromotion(Connection connection, PostgresSinkConfig config,
            ServerIdentity server) throws SQLException {
        return timelines(connection, config, server).submittedAfterPromotion(server);
    }

    /** What the runs table recorded of the prefix's runs on a server's cluster (each null if none). */
    private record Timelines(Long submittedOnCurrent, Long oldest, Long newest) {
        OptionalLong submittedAfterPromotion(ServerIdentity server) {
            return submittedOnCurrent != null && oldest != null && oldest < server.timeline()
                    ? OptionalLong.of(submittedOnCurrent) : OptionalLong.empty();
        }
    }

    private static Timelines timelines(Connection connection, PostgresSinkConfig config, ServerIdentity server)
            throws SQLException {
        if (server.systemIdentifier() == null || server.timeline() == null) {
            return new Timelines(null, null, null);
        }
        try (PreparedStatement query = connection.prepareStatement(config.schema().runs().timelinesOfClusterQuery())) {
            query.setLong(1, server.timeline());
            query.setString(2, config.sinkPrefix());
            query.setLong(3, server.systemIdentifier());
            try (ResultSet row = query.executeQuery()) {
                row.next();
                return new Timelines((Long) row.getObject(1), (Long) row.getObject(2), (Long) row.getObject(3));
            }
        }
    }

    /**
     * The signs of a change, for a committer explaining a lost transaction: those of the run's row,
     * and whether the lost transaction's epoch is a transaction id this server has not issued.
     *
     * @param connection in autocommit mode
     */
    public static List<String> seenByCommitter(Connection connection, PostgresSinkConfig config, long lostEpoch)
            throws SQLException {
        ServerIdentity server = ServerIdentity.read(connection);
        List<String> signs = signs(recorded(connection, config), config, server);
        if (lostEpoch >= server.nextXid()) {
            signs.add("its transaction-id counter (next xid " + server.nextXid() + ") is behind the writer that"
                    + " prepared the transaction (epoch " + lostEpoch + ")");
        }
        return signs;
    }

    /**
     * The signs that {@code server} changed since the run of {@code config} was registered on it, as
     * the runs table recorded it: for an effect worker, which applies no effect on such a server.
     *
     * @return a list the caller may add to
     */
    public static List<String> sinceRun(Connection connection, PostgresSinkConfig config, ServerIdentity server)
            throws SQLException {
        return signs(recorded(connection, config), config, server);
    }

    private static List<String> signs(Recorded run, PostgresSinkConfig config, ServerIdentity server) {
        // the run's id is a transaction id the server had issued: the counter must be past it
        List<String> signs = server.changesSince(new ServerIdentity(run.system(), run.timeline(), config.run() + 1),
                "run " + config.run());
        if (run.adopted()) { // recorded with this server's identity, which shows the change no more
            signs.add("run " + config.run() + " was adopted after a server change (" + config.tables().runs()
                    + " says ADOPTED): every start of it reconciles");
        }
        return signs;
    }

    /** The run's row: whether it exists, the identity recorded with it (null where unknown), whether adopted. */
    private record Recorded(boolean exists, Long system, Long timeline, boolean adopted) {}

    private static Recorded recorded(Connection connection, PostgresSinkConfig config) throws SQLException {
        try (PreparedStatement query = connection.prepareStatement(config.schema().runs().identityOfRunQuery())) {
            query.setString(1, config.sinkPrefix());
            query.setLong(2, config.run());
            try (ResultSet row = query.executeQuery()) {
                return row.next() ? new Recorded(true, (Long) row.getObject(1), (Long) row.getObject(2), row.getBoolean(3))
                        : new Recorded(false, null, null, false);
            }
        }
    }

    /**
     * Whether the prefix's runs were registered on this cluster (a replica or copy of it shares its
     * system identifier): unknown counts as no.
     */
    static boolean sameLineage(Connection connection, PostgresSinkConfig config, ServerIdentity server)
            throws SQLException {
        return server.systemIdentifier() != null
                && Objects.equals(server.systemIdentifier(), newestRecordedSystem(connection, config));
    }

    private static Long newestRecordedSystem(Connection connection, PostgresSinkConfig config) throws SQLException {
        try (PreparedStatement query = connection.prepareStatement(config.schema().runs().newestRecordedSystemQuery())) {
            query.setString(1, config.sinkPrefix());
            try (ResultSet row = query.executeQuery()) {
                return row.next() ? (Long) row.getObject(1) : null;
            }
        }
    }

    private static void adopt(Connection connection, PostgresSinkConfig config, ServerIdentity server, String jobId,
            String writerName) throws SQLException {
        RunsTable runs = config.schema().runs();
        try (PreparedStatement insert = connection.prepareStatement(runs.adoptStatement())) {
            insert.setString(1, config.sinkPrefix());
            insert.setLong(2, config.run());
            insert.setString(3, jobId);
            setNullable(insert, 4, server.systemIdentifier());
            setNullable(insert, 5, server.timeline());
            if (insert.executeUpdate() == 0) {
                return; // another subtask recorded it first
            }
        }
        LOG.warn("{}: run {} of sink prefix '{}' was registered after the point this server went back to, so {} lost"
                + " it; it is recorded again (adopted) so that this job runs on instead of being refused as a run the"
                + " database does not know. A later submission is numbered after it.", writerName, config.run(),
                config.sinkPrefix(), runs.name());
    }

    static void setNullable(PreparedStatement statement, int index, Long value) throws SQLException {
        if (value == null) {
            statement.setNull(index, Types.BIGINT);
        } else {
            statement.setLong(index, value);
        }
    }
}
