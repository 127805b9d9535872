package io.onceflow.sink.postgres.internal;

import java.sql.Array;
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
 * Internal. The start checks for what the user added to the sink's tables that would make a
 * checkpoint's transaction lock rows another transaction needs before its barrier.
 *
 * <p>The rule: a transaction prepared at a barrier keeps every lock it took until its checkpoint
 * completes, and the checkpoint completes only when every subtask has passed its barrier. If
 * subtask A's prepared transaction holds a row that subtask B must lock to write its rows before
 * its barrier, B waits for A's commit, A's commit waits for the checkpoint, the checkpoint waits for
 * B: a cycle through Flink that PostgreSQL's deadlock detector cannot see. After {@code lock_timeout}
 * the job restarts, replays the same rows and waits again, for ever. The sink's own statements lock
 * only rows of their own message ids, which one subtask owns; two things a user may add do not:
 *
 * <ul>
 *   <li>a unique index or exclusion constraint besides the primary key of the events table: two ids
 *       sharing its key, written by two subtasks, wait for each other's transaction;
 *   <li>a trigger on a table the checkpoint's transaction writes (the events table, its effect
 *       queue, the rejects table, the commit log): whatever rows it locks stay locked with the
 *       prepared transaction, and a shared one (a counter, a summary row) is needed by every subtask.
 * </ul>
 *
 * <p>Both {@code main}'s start of a run and every exactly-once writer's start check, since an index
 * or trigger may be added while the job runs; the next restart then refuses instead of stalling.
 * A trigger that locks only rows of its own message id (an audit row per id) is safe, but which rows
 * a trigger locks cannot be read from the catalog: the user opts in for it. The at-least-once sink
 * needs neither check: it commits each batch at once, so no lock outlives a statement's transaction
 * and PostgreSQL sees (and breaks) any wait cycle.
 */
@Internal
public final class BarrierLockChecks {
    private static final Logger LOG = LoggerFactory.getLogger(BarrierLockChecks.class);

    /** The setting that opts in for triggers. */
    public static final String OPT_IN_SETTING = "postgres.allow.triggers.that.may.stall.checkpoints";

    private BarrierLockChecks() {}

    /**
     * Refuses a unique index (with {@code parallelism} &gt; 1) and, unless
     * {@code allowTriggersThatMayStallCheckpoints}, a trigger; with it, logs a warning naming them.
     *
     * @throws IllegalStateException naming each index or trigger, why, and what to do
     */
    public static void check(Connection connection, PostgresSchema schema, int parallelism,
            boolean allowTriggersThatMayStallCheckpoints) throws SQLException {
        refuseUniqueIndexesAcrossSubtasks(connection, schema.events().name(), parallelism);
        List<String> triggers = triggers(connection, schema);
        if (triggers.isEmpty()) {
            return;
        }
        if (allowTriggersThatMayStallCheckpoints) {
            LOG.warn("Triggers on the sink's tables, accepted because {} = true: {}. Each checkpoint's prepared"
                    + " transaction keeps the row locks they take until the checkpoint completes; if one locks a row"
                    + " that other subtasks write too, checkpoints stall until lock_timeout restarts the job.",
                    OPT_IN_SETTING, triggers);
            return;
        }
        throw new IllegalStateException("the sink's tables have trigger(s): " + triggers + ". A checkpoint's"
                + " transaction runs them, and once prepared at the barrier it keeps every row lock they took until"
                + " the checkpoint completes. A trigger that updates a row other subtasks' rows update too (a"
                + " counter, a summary) makes their writers wait for that lock before their barrier, so the"
                + " checkpoint can never complete: a cycle through Flink that PostgreSQL's deadlock detector cannot"
                + " see. After postgres.lock.timeout the job restarts into the same wait, for ever. Drop the"
                + " trigger(s), or move their work into the effect function (postgres.effect.function, applied after"
                + " the commit, docs/effects.md); if each locks only rows of its own message id (an audit row per"
                + " id), set " + OPT_IN_SETTING + "=true (PostgresSinkBuilder.setAllowTriggersThatMayStallCheckpoints)"
                + " to accept them at that risk (docs/postgres.md).");
    }

    /**
     * With one writer subtask the second id of a shared key is refused like any other row (the
     * rejects table), after at most a wait for the previous checkpoint's commit.
     */
    private static void refuseUniqueIndexesAcrossSubtasks(Connection connection, String events, int parallelism)
            throws SQLException {
        if (parallelism <= 1) {
            return;
        }
        List<String> indexes = new ArrayList<>();
        try (PreparedStatement query = connection.prepareStatement("SELECT i.indexrelid::regclass::text FROM pg_index i"
                + " WHERE i.indrelid = to_regclass(?) AND (i.indisunique OR i.indisexclusion) AND NOT i.indisprimary"
                + " ORDER BY 1")) {
            query.setString(1, events);
            try (ResultSet rows = query.executeQuery()) {
                while (rows.next()) {
                    indexes.add(rows.getString(1));
                }
            }
        }
        if (!indexes.isEmpty()) {
            throw new IllegalStateException("the table " + events + " has unique index(es) or exclusion"
                    + " constraint(s) besides its primary key: " + indexes + ". With parallelism " + parallelism
                    + " two message ids that share such a key, written by two subtasks between two checkpoints, wait"
                    + " for each other's transaction until the job fails, on every replay. Drop them and enforce the"
                    + " rule downstream (e.g. in an effect function's own table), or run the sink with parallelism 1.");
        }
    }

    /**
     * The enabled user triggers ({@code NOT tgisinternal}: a foreign key's triggers are internal,
     * and take only key-share locks, which do not block each other) on the tables a checkpoint's
     * transaction writes and their partitions, as {@code table: trigger -> function}.
     */
    private static List<String> triggers(Connection connection, PostgresSchema schema) throws SQLException {
        List<String> triggers = new ArrayList<>();
        String[] tables = {schema.events().name(), schema.events().queue().name(), schema.rejects().name(),
                schema.commitLog().name()};
        Array names = connection.createArrayOf("text", tables);
        try (PreparedStatement query = connection.prepareStatement("SELECT t.tgrelid::regclass::text, t.tgname,"
                + " t.tgfoid::regproc::text FROM pg_trigger t WHERE NOT t.tgisinternal AND t.tgenabled <> 'D'"
                + " AND t.tgrelid IN (SELECT to_regclass(n.name) FROM unnest(?::text[]) AS n(name)"
                // a plain table is no partition tree: pg_partition_tree gives no row for it
                + " UNION SELECT tree.relid FROM unnest(?::text[]) AS n(name),"
                + " pg_partition_tree(to_regclass(n.name)) AS tree) ORDER BY 1, 2")) {
            query.setArray(1, names);
            query.setArray(2, names);
            try (ResultSet rows = query.executeQuery()) {
                while (rows.next()) {
                    triggers.add(rows.getString(1) + ": " + rows.getString(2) + " -> " + rows.getString(3));
                }
            }
        } finally {
            names.free();
        }
        return triggers;
    }
}
