package io.onceflow.tools.effects;

import io.onceflow.sink.postgres.EffectFunction;
import io.onceflow.sink.postgres.PostgresConnectionOptions;
import io.onceflow.sink.postgres.PostgresTableOptions;
import io.onceflow.sink.postgres.PostgresWriterOptions;
import io.onceflow.sink.postgres.internal.PostgresConnections;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.schema.EventsTable;
import io.onceflow.sink.postgres.internal.schema.PendingEffectsTable;
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
 * Queues again, once their cause is fixed, the effects that a sink recorded as failed ({@code
 * {"status":"failed",...}} in the events row's {@code result}: the effect function raised an error
 * about the message). One transaction sets their result back to pending and puts them in the
 * effect queue ({@link PendingEffectsTable#requeueFailedStatement}), then wakes the running job's
 * effect workers, which apply each exactly once, as any queued effect.
 *
 * <p>Exactly once also when re-driven twice, or by two operators at the same time: only rows whose
 * result says {@code failed} are queued, and the statement that queues them clears that result in
 * the same transaction, so a second run (which waits for the first's row locks) finds nothing. An
 * effect applied or rejected is never queued again.
 *
 * <p>Uses the sink's own connection settings ({@link PostgresConnections}: its timeouts, and
 * {@code onceflow-<prefix>-retry-failed} in {@code pg_stat_activity}).
 */
public final class FailedEffects {
    /** The session's name in {@code pg_stat_activity}, after the sink's prefix. */
    static final String SESSION_ROLE = "retry-failed";

    private final PostgresSinkConfig sink;
    private final EventsTable events;
    private final String effectFunction;
    private final String effectKeys;

    /**
     * @param tables the sink's tables; their {@code effectFunction} must be set
     * @param sinkPrefix the job's {@code postgres.sink.prefix}, for the session's name
     */
    public FailedEffects(PostgresConnectionOptions connection, PostgresTableOptions tables, PostgresWriterOptions writer,
            String sinkPrefix) {
        if (tables.effectFunction() == null) {
            throw new IllegalArgumentException("no effect function: there is nothing to re-drive effects for");
        }
        this.sink = new PostgresSinkConfig(connection, tables, writer, sinkPrefix, 0, PostgresSinkConfig.NO_RUN);
        this.events = new EventsTable(tables.events());
        this.effectFunction = tables.effectFunction();
        this.effectKeys = tables.effectKeys();
    }

    /**
     * What one re-drive did.
     *
     * @param events the events table
     * @param queued the ids queued again, in the order the statement returned them
     * @param notQueued of the ids asked for by name, each one not queued with why (empty for all)
     */
    public record Requeued(String events, List<String> queued, Map<String, String> notQueued) {
        /** The most ids {@link #toText} lists; the count is always complete. */
        static final int MAX_LISTED = 100;

        /** What the command prints. */
        public String toText(String effectFunction) {
            StringBuilder text = new StringBuilder();
            if (queued.isEmpty()) {
                text.append(notQueued.isEmpty() ? "No effect in " + events + " is recorded as failed: nothing was queued.\n"
                        : "Nothing was queued again.\n");
            } else {
                text.append("Queued again ").append(queued.size()).append(queued.size() == 1 ? " effect" : " effects")
                        .append(" recorded as failed in ").append(events).append(": ").append(listed(queued)).append('\n');
            }
            notQueued.forEach((id, why) -> text.append("  not queued: ").append(id).append(" (").append(why).append(")\n"));
            if (!queued.isEmpty()) {
                text.append("The effect workers of the running job apply them, each exactly once (they were woken);"
                        + " if no job runs, they wait in " + new PendingEffectsTable(events).name() + " for the next start"
                        + " with postgres.effect.function=" + effectFunction + ". Each outcome shows in its row's result in "
                        + events + ".\n");
            }
            return text.toString();
        }

        private static String listed(List<String> ids) {
            if (ids.size() <= MAX_LISTED) {
                return String.join(", ", ids);
            }
            return String.join(", ", ids.subList(0, MAX_LISTED)) + " and " + (ids.size() - MAX_LISTED) + " more";
        }
    }

    /**
     * Checks that the effect function (and the keys function, if set) can be called, then queues
     * again the failed effects of {@code ids}, or of every id when {@code ids} is empty.
     *
     * @throws IllegalStateException naming the setting and the fix, if a function cannot be called:
     *     nothing is queued then
     * @throws SQLException if the database cannot be used; nothing is queued then
     */
    public Requeued requeue(List<String> ids) throws SQLException {
        List<String> asked = List.copyOf(new LinkedHashSet<>(ids));
        try (Connection session = PostgresConnections.open(sink, SESSION_ROLE)) {
            EffectFunction.check(session, effectFunction, effectKeys);
            List<String> queued = new ArrayList<>();
            PendingEffectsTable queue = events.queue();
            PostgresConnections.inTransaction(session, () -> {
                try (PreparedStatement requeue = session.prepareStatement(queue.requeueFailedStatement())) {
                    Array array = asked.isEmpty() ? null : session.createArrayOf("text", asked.toArray());
                    requeue.setArray(1, array);
                    requeue.setArray(2, array);
                    requeue.setString(3, sink.sinkPrefix());
                    requeue.setArray(4, array);
                    requeue.setString(5, sink.sinkPrefix());
                    requeue.setString(6, effectFunction);
                    try (ResultSet rows = requeue.executeQuery()) {
                        while (rows.next()) {
                            queued.add(rows.getString(1));
                        }
                    }
                }
                if (!queued.isEmpty()) {
                    // delivered at commit: the workers wait for it between polls
                    try (Statement notify = session.createStatement()) {
                        notify.execute(queue.notifyStatement());
                    }
                }
            });
            List<String> others = asked.isEmpty() ? unboundFailures(session)
                    : asked.stream().filter(id -> !queued.contains(id)).toList();
            return new Requeued(events.name(), List.copyOf(queued), others.isEmpty() ? Map.of() : whyNot(session, others));
        }
    }

    /** The ids that failed in an earlier version, which named no sink: a re-drive of all leaves them. */
    private List<String> unboundFailures(Connection session) throws SQLException {
        List<String> ids = new ArrayList<>();
        try (Statement query = session.createStatement(); ResultSet rows = query.executeQuery(events.unboundFailuresQuery())) {
            while (rows.next()) {
                ids.add(rows.getString(1));
            }
        }
        return ids;
    }

    /** Why each of {@code ids} was not queued: its state now. */
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

    private String state(boolean noResult, String status, boolean isQueued, String failedInSink) {
        if (isQueued) {
            return "already queued: its effect is still to be applied";
        }
        if (noResult) {
            return "no result and not queued: written before the effect function was set, it has no effect to re-drive";
        }
        if (EffectFunction.REJECTED.equals(status)) {
            return "rejected by the effect function: a business outcome, never queued again";
        }
        if (EffectFunction.FAILED.equals(status) && failedInSink != null && !failedInSink.equals(sink.sinkPrefix())) {
            return "failed in the sink " + failedInSink + ": only that sink's re-drive queues it again, run the command"
                    + " with its settings (postgres.sink.prefix=" + failedInSink + ")";
        }
        if (EffectFunction.FAILED.equals(status) && failedInSink == null) {
            return "failed in an earlier version, which recorded no sink, so it may be another sink's: if it is this"
                    + " sink's, name it (--id) to queue it again with " + effectFunction;
        }
        if (EffectFunction.FAILED.equals(status)) {
            return "failed again, after a re-drive that ran at the same time: fix the cause, then run the command again";
        }
        return "applied: never queued again";
    }
}
