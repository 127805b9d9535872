package io.onceflow.tools.effects;

import io.onceflow.sink.postgres.internal.EffectFunction;
import io.onceflow.sink.postgres.options.PostgresConnectionOptions;
import io.onceflow.sink.postgres.options.PostgresTableOptions;
import io.onceflow.sink.postgres.options.PostgresWriterOptions;
import io.onceflow.sink.postgres.internal.PostgresConnections;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.EffectLogTable;
import io.onceflow.sink.postgres.internal.EventsTable;
import io.onceflow.sink.postgres.internal.PendingEffectsTable;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;

/**
 * What an operator does to the effects of one sink, each in one transaction that also logs it,
 * with the reason, in the effect log ({@code <events>_effect_log}):
 *
 * <ul>
 *   <li><b>retry failed</b>: effects whose function raised an error about the message stay queued,
 *       marked failed; once the cause is fixed, the mark is cleared and the running job's effect
 *       workers apply each exactly once ({@link EffectLogTable#retryFailedStatement});
 *   <li><b>retry rejected</b>, by name only: a rejection is a business outcome, but a rejection
 *       caused by a mistake (a wrong limit, an account opened late) may be undone: the result goes
 *       back to pending and the effect is queued again ({@link EffectLogTable#retryRejectedStatement});
 *   <li><b>skip</b>: a failed effect that is not to be called leaves the queue, its result says
 *       {@code skipped} with the reason ({@link EffectLogTable#skipFailedStatement}).
 * </ul>
 *
 * <p>Exactly once also when run twice, or by two operators at the same time: each statement
 * changes only rows in the state it acts on, and changes that state in the same transaction, so a
 * second run (which waits for the first's row locks) finds nothing. Retention never deletes a row
 * these act on: it keeps every queued row and every row waiting for its result.
 *
 * <p>Uses the sink's own connection settings ({@link PostgresConnections}: its timeouts, and
 * {@code onceflow-<prefix>-effects-cli} in {@code pg_stat_activity}).
 */
public final class EffectActions {
    /** The session's name in {@code pg_stat_activity}, after the sink's prefix. */
    static final String SESSION_ROLE = "effects-cli";

    private final PostgresSinkConfig sink;
    private final EventsTable events;
    private final String effectFunction;
    private final String effectKeys;

    /**
     * @param tables the sink's tables; their {@code effectFunction} must be set
     * @param sinkPrefix the job's {@code postgres.sink.prefix}: only this sink's effects are acted on
     */
    public EffectActions(PostgresConnectionOptions connection, PostgresTableOptions tables, PostgresWriterOptions writer,
            String sinkPrefix) {
        if (tables.effectFunction() == null) {
            throw new IllegalArgumentException("no effect function: there is nothing to re-drive effects for");
        }
        this.sink = new PostgresSinkConfig(connection, tables, writer, sinkPrefix, 0, null, PostgresSinkConfig.NO_RUN);
        this.events = new EventsTable(tables.events());
        this.effectFunction = tables.effectFunction();
        this.effectKeys = tables.effectKeys();
    }

    /**
     * What one action did.
     *
     * @param done the ids acted on, in the order the statement returned them
     * @param notDone of the ids asked for by name, each one not acted on with why (empty for all)
     */
    public record Outcome(String action, String events, List<String> done, Map<String, String> notDone) {
        /** The most ids {@link #toText} lists; the count is always complete. */
        static final int MAX_LISTED = 100;

        /** What the command prints. */
        public String toText(String effectFunction) {
            StringBuilder text = new StringBuilder();
            if (done.isEmpty()) {
                text.append(notDone.isEmpty() ? "No effect in " + events + " is recorded as failed: nothing was " + action
                        + ".\n" : "Nothing was " + action + ".\n");
            } else {
                text.append(capitalised(action)).append(' ').append(done.size()).append(done.size() == 1 ? " effect" : " effects")
                        .append(" of ").append(events).append(": ").append(listed(done)).append('\n');
            }
            notDone.forEach((id, why) -> text.append("  not ").append(action).append(": ").append(id).append(" (")
                    .append(why).append(")\n"));
            if (!done.isEmpty() && !action.equals("skipped")) {
                text.append("The effect workers of the running job apply them, each exactly once (they were woken);"
                        + " if no job runs, they wait in " + new PendingEffectsTable(events).name() + " for the next start"
                        + " with postgres.effect.function=" + effectFunction + ". Each outcome shows in its row's result in "
                        + events + ".\n");
            }
            if (!done.isEmpty()) {
                text.append("Logged, with the reason, in ").append(new PendingEffectsTable(events).log().name())
                        .append(".\n");
            }
            return text.toString();
        }

        private static String capitalised(String word) {
            return Character.toUpperCase(word.charAt(0)) + word.substring(1);
        }

        private static String listed(List<String> ids) {
            if (ids.size() <= MAX_LISTED) {
                return String.join(", ", ids);
            }
            return String.join(", ", ids.subList(0, MAX_LISTED)) + " and " + (ids.size() - MAX_LISTED) + " more";
        }
    }

    /**
     * Re-drives the failed effects of {@code ids}, or every failed effect of the sink when {@code
     * ids} is empty, once the effect function (and the keys function, if set) can be called.
     *
     * @throws IllegalStateException naming the setting and the fix, if a function cannot be called:
     *     nothing is changed then
     * @throws SQLException if the database cannot be used; nothing is changed then
     */
    public Outcome retryFailed(List<String> ids, String reason) throws SQLException {
        return act("re-driven", ids, events.queue().log().retryFailedStatement(), true, (statement, array) -> {
            statement.setString(1, effectFunction);
            statement.setArray(2, array);
            statement.setArray(3, array);
            statement.setString(4, sink.sinkPrefix());
            statement.setString(5, reason);
        });
    }

    /** Re-drives the rejected effects of {@code ids} (not empty), as {@link #retryFailed}. */
    public Outcome retryRejected(List<String> ids, String reason) throws SQLException {
        requireIds(ids);
        return act("re-driven", ids, events.queue().log().retryRejectedStatement(), true, (statement, array) -> {
            statement.setArray(1, array);
            statement.setString(2, sink.sinkPrefix());
            statement.setString(3, effectFunction);
            statement.setString(4, reason);
        });
    }

    /** Skips the failed effects of {@code ids} (not empty) with {@code reason}. */
    public Outcome skip(List<String> ids, String reason) throws SQLException {
        requireIds(ids);
        return act("skipped", ids, events.queue().log().skipFailedStatement(), false, (statement, array) -> {
            statement.setString(1, sink.sinkPrefix());
            statement.setArray(2, array);
            statement.setString(3, reason);
            statement.setString(4, reason);
        });
    }

    private static void requireIds(List<String> ids) {
        if (ids.isEmpty()) {
            throw new IllegalArgumentException("name the effects: this action is never taken on all of them");
        }
    }

    private interface Binder {
        void bind(PreparedStatement statement, Array ids) throws SQLException;
    }

    private Outcome act(String action, List<String> ids, String sql, boolean queues, Binder binder) throws SQLException {
        List<String> asked = List.copyOf(new LinkedHashSet<>(ids));
        try (Connection session = PostgresConnections.open(sink, SESSION_ROLE)) {
            if (queues) {
                EffectFunction.check(session, effectFunction, effectKeys);
            }
            List<String> done = new ArrayList<>();
            PostgresConnections.inTransaction(session, () -> {
                try (PreparedStatement statement = session.prepareStatement(sql)) {
                    binder.bind(statement, asked.isEmpty() ? null : session.createArrayOf("text", asked.toArray()));
                    try (ResultSet rows = statement.executeQuery()) {
                        while (rows.next()) {
                            done.add(rows.getString(1));
                        }
                    }
                }
                if (queues && !done.isEmpty()) {
                    // delivered at commit: the workers wait for it between polls
                    try (Statement notify = session.createStatement()) {
                        notify.execute(events.queue().notifyStatement());
                    }
                }
            });
            List<String> others = asked.stream().filter(id -> !done.contains(id)).toList();
            return new Outcome(action, events.name(), List.copyOf(done), others.isEmpty() ? Map.of() : whyNot(session, others));
        }
    }

    /** Why each of {@code ids} was not acted on: its state now. */
    private Map<String, String> whyNot(Connection session, List<String> ids) throws SQLException {
        Map<String, String> states = new LinkedHashMap<>();
        try (PreparedStatement query = session.prepareStatement(events.effectStatesQuery())) {
            query.setArray(1, session.createArrayOf("text", ids.toArray()));
            try (ResultSet rows = query.executeQuery()) {
                while (rows.next()) {
                    states.put(rows.getString(1), state(rows.getBoolean(2), rows.getString(3), rows.getBoolean(4),
                            rows.getString(5)));
                }
            }
        }
        Map<String, String> why = new LinkedHashMap<>();
        ids.forEach(id -> why.put(id, states.getOrDefault(id, "no row in " + events.name())));
        return why;
    }

    private String state(boolean noResult, String status, boolean isQueued, String queuedBySink) {
        if (queuedBySink != null && !queuedBySink.equals(sink.sinkPrefix())) {
            return "queued by the sink " + queuedBySink + ": only that sink acts on it, run the command with its"
                    + " settings (postgres.sink.prefix=" + queuedBySink + ")";
        }
        if (isQueued) {
            return "queued: its effect is still to be applied";
        }
        if (noResult) {
            return "no result and not queued: written before the effect function was set, it has no effect to re-drive";
        }
        if (EffectFunction.REJECTED.equals(status)) {
            return "rejected by the effect function: a business outcome; re-drive it by name with retry-rejected";
        }
        if (EffectFunction.FAILED.equals(status)) {
            return "failed: re-drive it with retry-failed, or skip it";
        }
        if (EffectFunction.SKIPPED.equals(status)) {
            return "skipped by an operator: never called";
        }
        return "applied: never queued again";
    }
}
