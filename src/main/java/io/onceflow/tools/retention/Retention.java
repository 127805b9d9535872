package io.onceflow.tools.retention;

import io.onceflow.config.ConfigException;
import io.onceflow.config.ProgramArguments;
import io.onceflow.sink.postgres.options.PostgresConnectionOptions;
import io.onceflow.sink.postgres.options.PostgresTableOptions;
import io.onceflow.sink.postgres.options.PostgresWriterOptions;
import io.onceflow.sink.postgres.internal.PostgresConnections;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.TransactionId;
import io.onceflow.sink.postgres.internal.CommitLogTable;
import io.onceflow.sink.postgres.internal.EventsTable;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * Deletes what one sink no longer needs from its events table and its commit log, in small
 * batches, each its own transaction, while the job runs. One window serves both tables: a row goes
 * only when it is older than {@code keep}, which must cover the longest time after which a message
 * may be delivered again and the age of the oldest checkpoint or savepoint anyone may restore, and
 * is refused when shorter than {@code dedup.ttl} (docs/retention.md says why).
 *
 * <ul>
 *   <li>Events: an id whose row is gone is, when delivered again after its dedup state expired or
 *       in a replay from a savepoint, written as a new row, and its effect is called again. Rows
 *       whose effect is not settled (still to be called, or failed and waiting for an operator) are
 *       never deleted.
 *   <li>Commit log: the committer reads it after a restore to tell a committed transaction from a
 *       lost one; a row is logged at its checkpoint, so a restore of a checkpoint younger than the
 *       window finds every row it asks for.
 * </ul>
 *
 * <p>The runs and writers tables keep one row per submission and per writer index: they stay.
 */
public final class Retention {
    /** The option that sets the window, named in the refusal. */
    public static final String KEEP_OPTION = "--keep";

    /** The sink's settings, for its connections: they pin its timeouts, as the writers' do. */
    private final PostgresSinkConfig sink;
    private final EventsTable events;
    private final CommitLogTable commitLog;
    private final String gidPrefix;
    private final Duration dedupTtl;

    /**
     * @param sinkPrefix whose commit-log rows are purged (the events table is the sink's own)
     * @param dedupTtl the job's {@code dedup.ttl}: the shortest window allowed
     */
    public Retention(PostgresConnectionOptions connection, PostgresTableOptions tables, PostgresWriterOptions writer,
            String sinkPrefix, Duration dedupTtl) {
        this.sink = new PostgresSinkConfig(connection, tables, writer, sinkPrefix, 0, null, PostgresSinkConfig.NO_RUN);
        this.events = new EventsTable(tables.events());
        this.commitLog = new CommitLogTable(tables.commitLog());
        this.gidPrefix = TransactionId.gidPrefix(sinkPrefix);
        this.dedupTtl = dedupTtl;
    }

    /** What one purge deleted and kept. */
    public record Purged(Timestamp cutoff, long events, long commitLog, long pendingEffectsKept) {
        /** One line per table, for the command's output. */
        public String toText() {
            return "deleted rows first processed before " + cutoff + ":\n"
                    + "  events table:      " + events + " rows deleted, " + pendingEffectsKept
                    + " older rows kept (effect pending or failed)\n"
                    + "  commit log:        " + commitLog + " rows deleted\n";
        }
    }

    /**
     * Deletes every row older than {@code keep}, {@code batchSize} rows per transaction.
     *
     * @throws ConfigException naming {@link #KEEP_OPTION} if {@code keep} is shorter than dedup.ttl
     */
    public Purged purge(Duration keep, int batchSize) throws SQLException {
        if (keep.compareTo(dedupTtl) < 0) {
            throw new ConfigException(List.of(ConfigException.problem(KEEP_OPTION,
                    "is " + ProgramArguments.formatDuration(keep) + ", shorter than dedup.ttl ("
                            + ProgramArguments.formatDuration(dedupTtl) + "): ids the dedup state has forgotten"
                            + " would lose their row too, and a redelivery would be written and its effect called again",
                    "Keep rows at least as long as dedup.ttl, and as long as the oldest checkpoint or savepoint you"
                            + " may restore.")));
        }
        try (Connection session = PostgresConnections.open(sink, "retention")) {
            Timestamp cutoff = serverTimeAgo(session, keep);
            long eventRows = purgeEvents(session, batchSize, cutoff);
            long logRows = deleteInBatches(session, commitLog.purgeBatchStatement(), batchSize, gidPrefix, cutoff);
            return new Purged(cutoff, eventRows, logRows, pendingEffectsBefore(session, cutoff));
        }
    }

    /** The server's clock: the tables' timestamps are the server's, whatever this host's clock says. */
    private static Timestamp serverTimeAgo(Connection session, Duration ago) throws SQLException {
        try (PreparedStatement query = session.prepareStatement("SELECT now() - make_interval(secs => ?)")) {
            query.setDouble(1, ago.toMillis() / 1000.0);
            try (ResultSet row = query.executeQuery()) {
                row.next();
                return row.getTimestamp(1);
            }
        }
    }

    /**
     * Purges the events table in batches, each a transaction of two statements: lock old settled
     * rows, then delete those still settled in a new snapshot ({@link EventsTable#purgeLockStatement}
     * says why), until a batch locks nothing.
     */
    private long purgeEvents(Connection session, int batchSize, Timestamp cutoff) throws SQLException {
        long deleted = 0;
        try (PreparedStatement lock = session.prepareStatement(events.purgeLockStatement());
                PreparedStatement delete = session.prepareStatement(events.purgeDeleteStatement())) {
            lock.setTimestamp(1, cutoff);
            lock.setInt(2, batchSize);
            while (true) {
                long[] batch = {0, 0}; // locked, deleted
                PostgresConnections.inTransaction(session, () -> {
                    List<String> ids = new ArrayList<>();
                    try (ResultSet rows = lock.executeQuery()) {
                        while (rows.next()) {
                            ids.add(rows.getString(1));
                        }
                    }
                    batch[0] = ids.size();
                    if (!ids.isEmpty()) {
                        delete.setArray(1, session.createArrayOf("text", ids.toArray()));
                        batch[1] = delete.executeUpdate();
                    }
                });
                deleted += batch[1];
                if (batch[0] == 0) {
                    return deleted;
                }
            }
        }
    }

    /** Runs the batch statement (its last parameter the batch size) until a batch deletes nothing. */
    private static long deleteInBatches(Connection session, String sql, int batchSize, Object... parameters)
            throws SQLException {
        long deleted = 0;
        try (PreparedStatement batch = session.prepareStatement(sql)) {
            for (int i = 0; i < parameters.length; i++) {
                batch.setObject(i + 1, parameters[i]);
            }
            batch.setInt(parameters.length + 1, batchSize);
            int rows;
            do {
                rows = batch.executeUpdate();
                deleted += rows;
            } while (rows > 0);
        }
        return deleted;
    }

    private long pendingEffectsBefore(Connection session, Timestamp cutoff) throws SQLException {
        try (PreparedStatement query = session.prepareStatement(events.pendingEffectsBeforeQuery())) {
            query.setTimestamp(1, cutoff);
            try (ResultSet row = query.executeQuery()) {
                row.next();
                return row.getLong(1);
            }
        }
    }
}
