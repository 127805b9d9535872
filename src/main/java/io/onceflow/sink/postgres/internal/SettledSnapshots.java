package io.onceflow.sink.postgres.internal;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.Optional;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The snapshot whose queued effects a batch may take without passing an earlier offset of their
 * partition that is still to commit. With exactly-once, one checkpoint's rows of a partition are
 * committed by several writer subtasks, moments apart: a later offset can be visible while an
 * earlier one is in another writer's transaction, prepared and not committed yet.
 *
 * <p>The rule: a batch takes a partition's effects in offset order up to the last one visible in a
 * snapshot taken before every transaction of the sink that is prepared now was prepared. An earlier
 * offset {@code x} than a visible {@code y} is in a transaction that was prepared before {@code y}'s
 * committed (x is read before y, so before the barrier of y's checkpoint at x's writer, and that
 * checkpoint completed before y committed). If that transaction is still prepared, it was prepared
 * before the snapshot, which the rule excludes; so it committed, before this batch's take, which
 * sees {@code x}. The worker keeps the recent snapshots, so while a checkpoint's transactions commit
 * one by one it goes on with what was committed before they were prepared.
 */
final class SettledSnapshots {
    private static final Logger LOG = LoggerFactory.getLogger(SettledSnapshots.class);
    /** Enough for a prepared checkpoint's commits at the workers' pace; older ones are dropped. */
    private static final int KEPT = 64;
    private static final long WAIT_WORTH_A_WARNING_MS = 60_000;

    private final String sql;
    private final String gidPrefix;
    private final Deque<Snapshot> recent = new ArrayDeque<>();
    private long blockedSince = -1;
    private boolean warned;

    /**
     * @param sql {@link io.onceflow.sink.postgres.internal.PendingEffectsTable#settledQuery}
     * @param gidPrefix what the gids of the sink's prepared transactions start with
     */
    SettledSnapshots(String sql, String gidPrefix) {
        this.sql = sql;
        this.gidPrefix = gidPrefix;
    }

    /**
     * Takes a snapshot now and returns the newest kept one taken before every prepared transaction
     * of the sink was prepared ({@code pg_snapshot} text); empty if there is none.
     */
    Optional<String> next(Connection connection) throws SQLException {
        Timestamp oldestPrepared;
        String oldestGid;
        try (PreparedStatement query = connection.prepareStatement(sql)) {
            query.setString(1, gidPrefix);
            try (ResultSet row = query.executeQuery()) {
                row.next();
                recent.addLast(new Snapshot(row.getString(1), row.getTimestamp(2)));
                oldestPrepared = row.getTimestamp(3);
                oldestGid = row.getString(4);
            }
        }
        Snapshot usable = null;
        for (Snapshot snapshot : recent) {
            if (oldestPrepared == null || snapshot.takenBy.before(oldestPrepared)) {
                usable = snapshot;
            }
        }
        // the oldest prepared transaction only commits, and newer ones are prepared later: an older
        // snapshot than the usable one is never usable again; the first kept one always stays (the
        // usable one, or the best hope when none is), the cap drops the oldest of the others
        while (usable != null && recent.peekFirst() != usable) {
            recent.removeFirst();
        }
        if (recent.size() > KEPT) {
            Snapshot first = recent.removeFirst();
            recent.removeFirst();
            recent.addFirst(first);
        }
        if (usable == null) {
            waiting(oldestGid, oldestPrepared);
            return Optional.empty();
        }
        blockedSince = -1;
        warned = false;
        return Optional.of(usable.snapshot);
    }

    private void waiting(String gid, Timestamp prepared) {
        long now = System.currentTimeMillis();
        if (blockedSince < 0) {
            blockedSince = now;
        } else if (!warned && now - blockedSince > WAIT_WORTH_A_WARNING_MS) {
            warned = true;
            LOG.warn("Effects wait for the prepared transaction {} (prepared at {}): it may hold earlier offsets of"
                    + " their partitions, so no effect committed after it was prepared is applied until it commits or"
                    + " rolls back. A restored job commits or rolls back its prefix's prepared transactions at its"
                    + " start; one left over from a job that is gone waits for an operator (docs/restore.md)", gid,
                    prepared);
        }
    }

    /** A snapshot, and a time no earlier than it was taken. */
    private record Snapshot(String snapshot, Timestamp takenBy) {}
}
