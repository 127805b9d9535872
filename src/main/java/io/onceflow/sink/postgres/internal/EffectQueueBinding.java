package io.onceflow.sink.postgres.internal;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import org.apache.flink.annotation.Internal;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Internal. The start's side of the rule that a queued effect belongs to one sink and one function
 * ({@link EffectQueueUpgrade#addedColumns()}): the workers and the re-drive take only their own,
 * and a start refuses what would leave effects that nobody applies, or that another sink or another
 * function would apply: effects queued by another sink prefix (two sinks on one events table), and
 * effects of this sink queued for another function, unless the operator re-binds them.
 */
@Internal
final class EffectQueueBinding {
    private static final Logger LOG = LoggerFactory.getLogger(EffectQueueBinding.class);

    private EffectQueueBinding() {}

    /**
     * Brings a queue of an earlier version up to this one: adds the columns it lacks ({@link
     * EffectQueueUpgrade#addedColumns()}; with the failure mark, the failures that version recorded
     * only in the events rows join the queue, marked failed, and with the topic, every queued row
     * gets its own, in the same transaction), and replaces its source order index by the partition
     * order index. The table's owner only.
     *
     * @throws IllegalStateException naming the statements the table's owner must run, if the user may
     *     not alter the table
     */
    static void upgradeIfNeeded(Connection connection, PendingEffectsTable queue) throws SQLException {
        for (String column : EffectQueueUpgrade.addedColumns().keySet()) {
            if (PostgresSchema.columnType(connection, queue.name(), column) == null) {
                upgrade(connection, queue, "no " + column + " column", queue.upgrade().addColumnStatements(column));
            }
        }
        if (!EffectQueueStartChecks.exists(connection, queue.partitionOrderIndex())) {
            List<String> statements = new ArrayList<>();
            statements.add(queue.createPartitionOrderIndexStatement());
            statements.addAll(queue.upgrade().dropSourceOrderIndexStatements());
            upgrade(connection, queue, "no index " + queue.partitionOrderIndex(), statements);
        }
    }

    private static void upgrade(Connection connection, PendingEffectsTable queue, String lacking,
            List<String> statements) throws SQLException {
        refuseBehindPreparedTransactions(connection, queue, lacking);
        try {
            PostgresConnections.inTransaction(connection, () -> {
                try (Statement statement = connection.createStatement()) {
                    PostgresSchema.lockSchema(statement);
                    for (String sql : statements) {
                        statement.execute(sql);
                    }
                }
            });
        } catch (SQLException e) {
            if (!SqlStates.is(e, SqlStates.INSUFFICIENT_PRIVILEGE)) {
                throw e;
            }
            throw new IllegalStateException("the effect queue " + queue.name() + " of an earlier version has " + lacking
                    + ", and the user may not add it (only the table's owner may): have the owner run, in one"
                    + " transaction, " + String.join("; ", statements) + "; then start the job again ("
                    + e.getMessage() + ")", e);
        }
    }

    /**
     * The ALTER TABLE (and CREATE INDEX) needs the queue to itself, and a prepared transaction of the earlier version (of
     * the checkpoint this start restores) holds it until this job's committer commits it, after the
     * start: waiting would end in lock_timeout at every start. Refuses at once, naming the way out.
     */
    private static void refuseBehindPreparedTransactions(Connection connection, PendingEffectsTable queue,
            String lacking) throws SQLException {
        long holding;
        try (PreparedStatement query = connection.prepareStatement(queue.queuedByPreparedTransactionsQuery());
                ResultSet count = query.executeQuery()) {
            count.next();
            holding = count.getLong(1);
        }
        if (holding > 0) {
            throw new IllegalStateException("the effect queue " + queue.name() + " of an earlier version has "
                    + lacking + ", and " + holding + " prepared transaction(s) of the earlier version (of the"
                    + " checkpoint this start would restore, committed only after the start) hold it, so it cannot be"
                    + " added: resume the earlier version from that checkpoint and stop it with stop-with-savepoint"
                    + " (which commits them), then start this version from that savepoint (docs/effects.md,"
                    + " \"Bound to a sink and a function\", Upgrading)");
        }
    }

    /**
     * Adopts the effects that have no owner (queued by an earlier version), then refuses the start
     * if effects are queued by another sink prefix, or by this one for another function. With {@code
     * refuseOtherSinks} false (a run continued by a JobManager failover), another sink's effects are
     * only logged: that sink started on an empty queue while this run ran, and must not stop it.
     *
     * @param function the configured effect function, which exists (checked before)
     * @throws IllegalStateException naming the other sink or function and the fix
     */
    static void requireOwnEffectsOnly(Connection connection, PendingEffectsTable queue, String eventsTable,
            String sinkPrefix, String function, boolean refuseOtherSinks) throws SQLException {
        String identity = identity(connection, function);
        PostgresConnections.inTransaction(connection, () -> {
            try (Statement lock = connection.createStatement()) {
                PostgresSchema.lockSchema(lock); // two subtasks' starts adopt once
            }
            try (PreparedStatement adopt = connection.prepareStatement(queue.adoptUnboundStatement())) {
                adopt.setString(1, sinkPrefix);
                adopt.setString(2, function);
                adopt.setString(3, sinkPrefix);
                int adopted = adopt.executeUpdate();
                if (adopted > 0) {
                    LOG.info("Sink {} adopted {} effects queued in {} without a sink or function (by an earlier"
                            + " version): it applies them with {}", sinkPrefix, adopted, queue.name(), identity);
                }
            }
            try (PreparedStatement query = connection.prepareStatement(queue.bindingsQuery());
                    ResultSet bindings = query.executeQuery()) {
                while (bindings.next()) {
                    if (!refuseOtherSinks && !sinkPrefix.equals(bindings.getString(1))) {
                        LOG.warn("{} effects are queued in {} by the sink {}, which shares the events table {} with this"
                                + " sink {}: give each job its own postgres.table (docs/effects.md, \"Bound to a sink and"
                                + " a function\")", bindings.getLong(3), queue.name(), bindings.getString(1), eventsTable,
                                sinkPrefix);
                        continue;
                    }
                    refuseOthers(queue, eventsTable, sinkPrefix, identity, bindings.getString(1), bindings.getString(2),
                            bindings.getLong(3));
                }
            }
        });
    }

    private static void refuseOthers(PendingEffectsTable queue, String eventsTable, String sinkPrefix, String identity,
            String queuedBy, String queuedFor, long count) {
        if (!sinkPrefix.equals(queuedBy)) {
            throw new IllegalStateException(count + " effects are queued in " + queue.name() + " by the sink "
                    + queuedBy + " (postgres.sink.prefix), and this sink " + sinkPrefix + " uses the same events table"
                    + " (postgres.table=" + eventsTable + "): two sinks must not share one, so give this job its own"
                    + " postgres.table; if this job is that sink renamed, start it with postgres.sink.prefix="
                    + queuedBy + " until the queue drains, and re-drive or skip its failed effects with that sink's"
                    + " settings (docs/effects.md, \"Bound to a sink and a function\")");
        }
        // NULL: failed effects, which wait for an operator whose re-drive binds them to its function
        if (queuedFor != null && !identity.equals(queuedFor)) {
            throw new IllegalStateException(count + " effects of this sink are queued in " + queue.name()
                    + " for the function " + queuedFor + ", and postgres.effect.function is now " + identity
                    + ": start with the function they were queued for until the queue drains, or, to have " + identity
                    + " apply them instead, run " + queue.rebindStatement(sinkPrefix, queuedFor, identity)
                    + "; then start again (docs/effects.md, \"Bound to a sink and a function\")");
        }
    }

    /** The function's identity as the queue records it ({@link PendingEffectsTable#functionIdentity}). */
    private static String identity(Connection connection, String function) throws SQLException {
        try (PreparedStatement query = connection.prepareStatement(PendingEffectsTable.functionIdentityQuery())) {
            query.setString(1, function);
            try (ResultSet found = query.executeQuery()) {
                found.next();
                return found.getString(1);
            }
        }
    }
}
