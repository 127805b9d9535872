package io.onceflow.sink.postgres.internal.commit;

import io.onceflow.sink.postgres.internal.PostgresConnections;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.schema.EventsTable;
import io.onceflow.sink.postgres.internal.writer.Rows;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.function.IntPredicate;
import org.apache.flink.annotation.Internal;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Internal. The effects of the exactly-once sink, called right after the transaction that inserted
 * their inbox rows has committed, rather than inside it.
 *
 * <p><b>Why not in the checkpoint's transaction.</b> A prepared transaction keeps its row locks
 * until {@code COMMIT PREPARED}, which waits for the checkpoint to complete. An effect changes rows
 * that many messages share (an account's balance). In the prepared transaction, writer subtask A's
 * checkpoint-N transaction would hold account X's lock while subtask B, before its own barrier N,
 * applies a payment to X: B waits for A's commit, A's commit waits for checkpoint N, and checkpoint N
 * waits for B: a deadlock that only {@code lock_timeout} breaks, with a restart, again and again
 * (with thousands of accounts, at nearly every checkpoint). The same happens inside one subtask when
 * its queued upserts block the task thread before the commit notification runs.
 *
 * <p><b>How it stays exactly once.</b> The writer tags each row it inserts with the gid of the
 * checkpoint's transaction ({@code effect_transaction}); the row's {@code result} stays NULL. After
 * {@code COMMIT PREPARED} of that gid (or on finding it committed before, for a restored
 * committable), the committer calls the effect for the rows of the gid whose result is still NULL,
 * in transactions of at most {@code batchSize} rows: each locks its rows ({@code SELECT ... FOR
 * UPDATE}, which skips rows whose result another session set meanwhile), calls the function for
 * them and stores the results ({@link EffectCalls}), and commits. The effect's changes and the
 * result that records them commit together, so an effect happens once however often this runs: a
 * crash in between leaves result NULL, and the next run calls it then. A writer starting up calls
 * the effects left pending by committed transactions of the indices it covers (a crash after the
 * commit, then a start that no longer restores that committable).
 *
 * <p>What this means for users: a message's inbox row becomes visible with its checkpoint, and its
 * effect a moment later (result NULL means "pending"). Rows locked by an effect are locked only for
 * one short transaction, not across a checkpoint. Effects of concurrent committers may still
 * deadlock with each other on shared rows; PostgreSQL detects it (40P01) and the committer retries.
 */
@Internal
public final class PendingEffects {
    private static final Logger LOG = LoggerFactory.getLogger(PendingEffects.class);

    private final String lockPendingSql;
    private final String pendingTransactionsSql;
    private final int chunk;
    private final EffectCalls calls;

    public PendingEffects(String table, String effectFunction, int chunk, PostgresSinkMetrics metrics) {
        EventsTable events = new EventsTable(table);
        this.lockPendingSql = events.lockPendingEffectsStatement();
        this.pendingTransactionsSql = events.pendingEffectTransactionsStatement();
        this.chunk = chunk;
        this.calls = new EffectCalls(events, effectFunction, metrics);
    }

    /** The effects of the sink configured by {@code config}, or null when it has none. */
    public static PendingEffects of(PostgresSinkConfig config, PostgresSinkMetrics metrics) {
        return config.tables().effectFunction() == null ? null
                : new PendingEffects(config.tables().events(), config.tables().effectFunction(), config.writer().batchSize(), metrics);
    }

    /**
     * Calls the effects of the committed transaction {@code transaction} that have not been called.
     *
     * @param connection in autocommit mode; left in autocommit mode
     * @return how many rows' effects this call made
     */
    public long callFor(Connection connection, TransactionId transaction) throws SQLException {
        long called = 0;
        while (true) {
            List<String> ids = new ArrayList<>();
            PostgresConnections.inTransaction(connection, () -> {
                calls.serialize(connection);
                ids.addAll(lockPending(connection, transaction.encode()));
                if (!ids.isEmpty()) {
                    calls.call(connection, Rows.ofIds(ids));
                }
            });
            if (ids.isEmpty()) {
                return called;
            }
            called += ids.size();
        }
    }

    private List<String> lockPending(Connection connection, String gid) throws SQLException {
        List<String> ids = new ArrayList<>();
        try (PreparedStatement lock = connection.prepareStatement(lockPendingSql)) {
            lock.setString(1, gid);
            lock.setInt(2, chunk);
            try (ResultSet rows = lock.executeQuery()) {
                while (rows.next()) {
                    ids.add(rows.getString(1));
                }
            }
        }
        return ids;
    }

    /**
     * Calls the effects still pending for committed transactions of {@code sinkPrefix}'s subtask
     * indices that {@code covers}. Rows of transactions that are only prepared are not visible, so
     * every pending row found belongs to a committed one.
     *
     * @param connection in autocommit mode; left in autocommit mode
     */
    public void callLeftOvers(Connection connection, String sinkPrefix, IntPredicate covers, String writerName)
            throws SQLException {
        List<TransactionId> pending = new ArrayList<>();
        try (PreparedStatement query = connection.prepareStatement(pendingTransactionsSql)) {
            query.setString(1, TransactionId.gidPrefix(sinkPrefix));
            try (ResultSet rows = query.executeQuery()) {
                while (rows.next()) {
                    TransactionId.parse(rows.getString(1), sinkPrefix)
                            .filter(id -> covers.test(id.subtaskIndex()))
                            .ifPresent(pending::add);
                }
            }
        }
        for (TransactionId transaction : pending) {
            long called = callFor(connection, transaction);
            if (called > 0) {
                LOG.info("{} called the {} effects that committed transaction {} left pending", writerName, called,
                        transaction);
            }
        }
    }
}
