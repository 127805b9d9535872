package io.onceflow.sink.postgres.internal;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Savepoint;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import org.apache.flink.annotation.Internal;
import org.postgresql.jdbc.PgConnection;

/**
 * Internal. One transaction of effects: takes the lock of one source partition that no other batch
 * holds and that is not set aside, trying them in turn from the one after the partition it took
 * last, and up to {@code limit} of its queued effects from its head on, in offset order
 * ({@link PendingEffectsTable#takeStatement}); locks
 * their keys ({@link EffectKeys}); calls the function for them in that order ({@link EffectCalls});
 * stores the results; and deletes them from the queue, except those that failed, which stay
 * marked failed for an operator. All of it commits together or not at all: an effect's changes,
 * its recorded result and its leaving the queue are one, so however often this runs, crashes or
 * overlaps with another worker (a zombie's), each effect happens once.
 */
@Internal
public final class EffectBatch {
    private final String partitionsSql;
    private final String tryLockSql;
    private final String takeSql;
    /** With a keys function: {@link #takeSql} that computes the keys too. */
    private final String takeWithKeysSql;
    private final String sinkPrefix;
    private final String effectFunction;
    private final String dequeueSql;
    private final String markFailedSql;
    private final EffectCalls calls;
    /** Null without a keys function. */
    private final EffectKeys keys;
    /** The partition ({@code topic/partition}) the last run took effects of, or null: the one to set aside when it fails. */
    private String headPartition;
    /**
     * Where the next run starts trying partitions: after the one it took last, so that each gets its
     * turn. Moved on only when the batch commits: a failed batch's partition is tried first again,
     * so that the worker's retry with one effect ({@link EffectWorker}) is of that partition, and
     * sets it aside if it fails alone.
     */
    private int nextPartition;
    /** The transaction id (xid8) of the last run that took effects and committed (or may have), or -1. */
    private long transactionId = -1;
    /** The keys of the effects the last run took, computed as it took them; null if it could not. */
    private Map<String, Set<Long>> takenKeys;
    /** The turn of the partition the running batch took, or -1. */
    private int takenTurn;
    private final SettledSnapshots settled;
    /** The run whose effects this batch applies, or {@link PostgresSinkConfig#NO_RUN}: no run to check. */
    private final long run;
    /** Null without a run. */
    private final RunsTable runs;

    /**
     * @param sinkPrefix the sink whose queued effects it takes, with {@code effectFunction}: no other's
     * @param keysFunction null for none
     * @param recordOutcomes whether each outcome is also recorded for the results topic ({@link
     *     io.onceflow.sink.postgres.internal.EffectOutcomesTable})
     */
    public EffectBatch(EventsTable events, String sinkPrefix, String effectFunction, String keysFunction,
            boolean recordOutcomes, PostgresSinkMetrics metrics) {
        this(events, sinkPrefix, effectFunction, keysFunction, recordOutcomes, metrics, null, PostgresSinkConfig.NO_RUN);
    }

    /**
     * The batch of an effect worker of the sink configured by {@code config}: of its run too, so that
     * once a newer run of the prefix is registered (this job was replaced) it applies nothing more
     * ({@link ReplacedRunException}), whatever that run's settings (its function, keys, results topic).
     */
    static EffectBatch of(PostgresSinkConfig config, PostgresSinkMetrics metrics) {
        return new EffectBatch(new EventsTable(config.tables().events()), config.sinkPrefix(),
                config.tables().effectFunction(), config.tables().effectKeys(), config.effectResults() != null, metrics,
                config.schema().runs(), config.run());
    }

    private EffectBatch(EventsTable events, String sinkPrefix, String effectFunction, String keysFunction,
            boolean recordOutcomes, PostgresSinkMetrics metrics, RunsTable runs, long run) {
        this.runs = runs;
        this.run = run;
        PendingEffectsTable queue = events.queue();
        this.sinkPrefix = sinkPrefix;
        this.effectFunction = effectFunction;
        this.partitionsSql = queue.partitionsQuery();
        this.tryLockSql = queue.tryLockPartitionStatement();
        this.dequeueSql = queue.dequeueStatement();
        this.markFailedSql = queue.markFailedStatement();
        this.calls = new EffectCalls(events, sinkPrefix, effectFunction, recordOutcomes, metrics);
        this.keys = keysFunction == null ? null : new EffectKeys(events, keysFunction);
        this.takeSql = queue.takeStatement(null);
        this.takeWithKeysSql = keys == null ? null : queue.takeStatement(keys.hashesColumn("e"));
        this.settled = new SettledSnapshots(PendingEffectsTable.settledQuery(), TransactionId.gidPrefix(sinkPrefix));
    }

    /** As {@link #run(Connection, int, Set)}, with no partition set aside. */
    public int run(Connection connection, int limit) throws SQLException {
        return run(connection, limit, Set.of());
    }

    /**
     * Runs one transaction of at most {@code limit} effects, none of partitions {@code setAside}.
     *
     * @param connection in autocommit mode; left in autocommit mode
     * @return how many queued effects it took (called, or recorded as failed); 0 when none was free
     */
    public int run(Connection connection, int limit, Set<String> setAside) throws SQLException {
        int[] taken = {0};
        headPartition = null;
        takenTurn = -1;
        // the batch's transaction id, and whether its work is done (only its commit can fail after)
        long[] xid = {-1};
        boolean[] committing = {false};
        try {
            runTransaction(connection, limit, setAside, taken, xid, committing);
        } finally {
            // committed, or its commit's outcome unknown (the connection broke during COMMIT): a server
            // that lacks it may have lost it. Not a transaction that rolled back: no server needs it.
            if (committing[0] && xid[0] >= 0) {
                transactionId = xid[0];
            }
        }
        if (takenTurn >= 0) {
            nextPartition = takenTurn + 1;
        }
        return taken[0];
    }

    private void runTransaction(Connection connection, int limit, Set<String> setAside, int[] taken, long[] xid,
            boolean[] committing) throws SQLException {
        PostgresConnections.inTransaction(connection, () -> {
            // with keys, a batch stops where its keys would pass EffectKeys' limit (a key a message at
            // least): effects taken beyond it only go back to the queue, their keys computed for nothing
            Rows rows = lockBatch(connection, keys == null ? limit : Math.min(limit, EffectKeys.MAX_KEYS_PER_TRANSACTION),
                    setAside);
            if (rows.size() == 0) {
                return;
            }
            requireNewestRun(connection);
            xid[0] = currentTransactionId(connection);
            EffectOutcomes outcomes = new EffectOutcomes();
            Rows locked = keys == null ? rows
                    : takenKeys == null ? keys.lock(connection, rows, outcomes) : keys.lock(connection, rows, takenKeys, outcomes);
            calls.call(connection, locked, outcomes);
            calls.store(connection, outcomes);
            Set<String> done = new HashSet<>(outcomes.ids);
            done.addAll(Arrays.asList(locked.ids)); // a row with a result already (a stale queue row) leaves too
            List<String> failed = outcomes.failedIds();
            failed.forEach(done::remove);
            execute(connection, dequeueSql, done);
            execute(connection, markFailedSql, failed);
            taken[0] = done.size() + failed.size();
            committing[0] = true;
        });
    }

    /** See {@link SinkRuns#refuseIfReplacedUntilCommit}; nothing to check for a batch built without a run's table. */
    private void requireNewestRun(Connection connection) throws SQLException {
        if (runs != null) {
            SinkRuns.refuseIfReplacedUntilCommit(connection, runs, sinkPrefix, run);
        }
    }

    private static void execute(Connection connection, String sql, Collection<String> ids) throws SQLException {
        if (ids.isEmpty()) {
            return;
        }
        try (PreparedStatement statement = connection.prepareStatement(sql)) {
            statement.setArray(1, connection.unwrap(PgConnection.class).createArrayOf("text", ids.toArray()));
            statement.executeUpdate();
        }
    }

    /**
     * The transaction id of the last {@link #run} that took effects and committed them, or whose
     * commit's outcome is unknown (it failed in COMMIT); -1 if none did. Not of one that rolled back.
     * Once it returned, a server that has not issued it lost that commit (or may have).
     */
    public long lastTransactionId() {
        return transactionId;
    }

    private static long currentTransactionId(Connection connection) throws SQLException {
        try (PreparedStatement query = connection.prepareStatement("SELECT pg_current_xact_id()::text::bigint");
                ResultSet xid = query.executeQuery()) {
            xid.next();
            return xid.getLong(1);
        }
    }

    /**
     * The partition of the first effect the last {@link #run} took, or whose take failed; null if it
     * took none.
     */
    public String headPartition() {
        return headPartition;
    }

    /**
     * The effects of the first partition in turn, not set aside, whose lock this transaction gets
     * and which has effects of this sink and function to call; empty if none has. A partition locked
     * on the way without any is let go at once (rolled back to a savepoint taken before its lock):
     * held to the end of the transaction, what is queued in it meanwhile would wait for this batch's
     * calls of another partition, a slow one's too, while other workers are idle.
     */
    private Rows lockBatch(Connection connection, int limit, Set<String> setAside) throws SQLException {
        Optional<String> snapshot = settled.next(connection);
        if (snapshot.isEmpty()) {
            return Rows.ofIds(List.of());
        }
        List<SourcePartition> partitions = new ArrayList<>();
        try (PreparedStatement query = connection.prepareStatement(partitionsSql);
                ResultSet rows = query.executeQuery()) {
            while (rows.next()) {
                SourcePartition partition = new SourcePartition(rows.getString(1), rows.getInt(2));
                if (!setAside.contains(partition.key())) {
                    partitions.add(partition);
                }
            }
        }
        if (partitions.isEmpty()) {
            return Rows.ofIds(List.of());
        }
        // a partition's lock is taken under this savepoint, and let go by rolling back to it if the
        // partition has nothing to take
        Savepoint attempt = connection.setSavepoint();
        for (int i = 0; i < partitions.size(); i++) {
            int turn = Math.floorMod(nextPartition + i, partitions.size());
            SourcePartition partition = partitions.get(turn);
            if (!tryLock(connection, partition)) {
                continue;
            }
            // named before the take: a take that fails (a keys function's error that is not about the
            // message: a timeout, a privilege) fails of this partition, which the worker then sets aside
            headPartition = partition.key();
            List<String> ids = take(connection, partition, limit, snapshot.get());
            if (ids.isEmpty()) {
                headPartition = null;
                connection.rollback(attempt);
                continue;
            }
            connection.releaseSavepoint(attempt); // its lock and the rows' stay, to the end of the transaction
            takenTurn = turn;
            return Rows.ofIds(ids);
        }
        connection.releaseSavepoint(attempt);
        return Rows.ofIds(List.of());
    }

    private boolean tryLock(Connection connection, SourcePartition partition) throws SQLException {
        try (PreparedStatement lock = connection.prepareStatement(tryLockSql)) {
            lock.setString(1, partition.topic());
            lock.setInt(2, partition.partition());
            try (ResultSet locked = lock.executeQuery()) {
                locked.next();
                return locked.getBoolean(1);
            }
        }
    }

    /**
     * The effects of {@code partition} to take, with their keys if there is a keys function: in offset
     * order up to the last one {@code snapshot} sees ({@link SettledSnapshots}). A keys function that
     * fails on one message's data fails the statement: then they are taken without, and {@link
     * EffectKeys#lock(Connection, Rows, EffectOutcomes)} tells that message from the others.
     */
    private List<String> take(Connection connection, SourcePartition partition, int limit, String snapshot)
            throws SQLException {
        takenKeys = null;
        if (takeWithKeysSql == null) {
            return take(connection, takeSql, partition, limit, snapshot, null);
        }
        Savepoint savepoint = connection.setSavepoint();
        try {
            Map<String, Set<Long>> keysById = new HashMap<>();
            List<String> ids = take(connection, takeWithKeysSql, partition, limit, snapshot, keysById);
            keysById.keySet().retainAll(ids);
            connection.releaseSavepoint(savepoint);
            takenKeys = keysById;
            return ids;
        } catch (SQLException e) {
            if (!SqlStates.isAboutTheMessage(e)) {
                throw e;
            }
            connection.rollback(savepoint);
            return take(connection, takeSql, partition, limit, snapshot, null);
        }
    }

    private List<String> take(Connection connection, String sql, SourcePartition partition, int limit, String snapshot,
            Map<String, Set<Long>> keysById) throws SQLException {
        List<String> ids = new ArrayList<>();
        int settledCount = 0;
        try (PreparedStatement take = connection.prepareStatement(sql)) {
            take.setString(1, snapshot);
            take.setString(2, sinkPrefix);
            take.setString(3, effectFunction);
            take.setString(4, partition.topic());
            take.setInt(5, partition.partition());
            take.setInt(6, limit);
            try (ResultSet rows = take.executeQuery()) {
                while (rows.next()) {
                    ids.add(rows.getString(1));
                    if (keysById != null) {
                        keysById.put(rows.getString(1), EffectKeys.keysOf(rows.getArray(2)));
                    }
                    if (rows.getBoolean(keysById == null ? 2 : 3)) {
                        settledCount = ids.size();
                    }
                }
            }
        }
        // the rows after the last one the snapshot sees stay locked to the end of the batch, not taken
        return new ArrayList<>(ids.subList(0, settledCount));
    }

    /** A source partition as the queue keys it: {@code ''} and -1 for a row of an earlier version without them. */
    private record SourcePartition(String topic, int partition) {
        /** As {@link PartitionsSetAside} and the logs name it. */
        String key() {
            return topic + "/" + partition;
        }
    }
}
