package io.onceflow.sink.postgres;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.sink.postgres.internal.PostgresConnections;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.EffectWorker;
import io.onceflow.sink.postgres.internal.EventsTable;
import io.onceflow.sink.postgres.internal.PendingEffectsTable;
import io.onceflow.testing.Eventually;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * A randomized schedule against the partition-locked effect batches (EffectBatch): the workers of two
 * sinks on one queue (three of one, one of the other), queue rows of an earlier version without a
 * topic or partition, stale rows (their events row gone), heads that fail for a while for a reason
 * that is not the message's (retried), slow effects, effects that fail on their data until an
 * operator re-drives them, new effects committed while the workers run, and worker sessions
 * terminated at random points (as a paused worker's is by idle_in_transaction_session_timeout). What
 * must hold: every effect is called once, stale and other sinks' effects are never called by the
 * wrong worker, and each sink's partition is called in offset order (re-driven effects aside, which
 * come later by design). The seed is printed; {@code -Donceflow.test.seed=N} repeats a schedule's
 * inputs (the timing is the machine's).
 */
class EffectScheduleTest {
    private static final String FUNCTION = "ledger.record_call";
    private static final String[] SINKS = {"ordered", "other"};
    private static final Duration CHAOS = Duration.ofSeconds(12);

    private final SinkDatabase db = new SinkDatabase();

    @Test
    void everyEffectOnceAndEachPartitionInOffsetOrderUnderARandomSchedule() throws Exception {
        long seed = Long.getLong("onceflow.test.seed", System.nanoTime());
        System.out.println("EffectScheduleTest seed: " + seed + " (-Donceflow.test.seed=" + seed + " repeats its inputs)");
        Random random = new Random(seed);
        db.execute("CREATE SCHEMA ledger");
        db.execute("CREATE TABLE ledger.calls (seq bigserial PRIMARY KEY, id text NOT NULL, sink text, part text,"
                + " source_offset bigint, caller text)");
        db.execute("CREATE TABLE ledger.fixed (id text PRIMARY KEY)");
        db.execute("CREATE FUNCTION " + FUNCTION + "(message_id text, payload jsonb) RETURNS jsonb LANGUAGE plpgsql"
                + " AS $$ BEGIN\n"
                + "  IF payload ? 'sleep' THEN PERFORM pg_sleep((payload->>'sleep')::float / 1000); END IF;\n"
                // a sequence is not rolled back: it counts every try
                + "  IF payload ? 'flaky' AND nextval(payload->>'flaky') <= (payload->>'times')::int THEN\n"
                + "    RAISE EXCEPTION 'not about the message' USING ERRCODE = '40001';\n"
                + "  END IF;\n"
                + "  IF payload ? 'broken' AND NOT EXISTS (SELECT FROM ledger.fixed f WHERE f.id = message_id) THEN\n"
                + "    RAISE EXCEPTION 'about the message' USING ERRCODE = 'P0001';\n"
                + "  END IF;\n"
                + "  INSERT INTO ledger.calls (id, sink, part, source_offset, caller) SELECT q.id, q.sink_prefix,"
                + "    coalesce(q.source_topic, '') || '/' || coalesce(q.source_partition, -1), q.source_offset,"
                + "    current_setting('application_name')"
                + "    FROM " + SinkDatabase.TABLE + "_effect_queue q WHERE q.id = message_id;\n"
                + "  RETURN jsonb_build_object('status', 'applied'); END $$");
        Map<String, PostgresSinkConfig> configs = new HashMap<>();
        for (String sink : SINKS) { // both start on an empty queue, as after a JobManager failover
            configs.put(sink, db.config(db.builder(sink).setEffectFunction(FUNCTION).setBatchSize(1 + random.nextInt(8))));
        }
        Inputs inputs = new Inputs(random);
        inputs.commit(200);

        List<EffectWorker> workers = new ArrayList<>();
        PostgresSinkMetrics metrics = PostgresSinkMetrics.unregistered();
        try (Connection chaos = PostgresConnections.open(configs.get("ordered"), "review-chaos")) {
            for (int subtask = 0; subtask < 3; subtask++) {
                workers.add(EffectWorker.startIfConfigured(configs.get("ordered"), subtask, 3, metrics));
            }
            workers.add(EffectWorker.startIfConfigured(configs.get("other"), 0, 1, metrics));
            long end = System.nanoTime() + CHAOS.toNanos();
            while (System.nanoTime() < end) {
                Thread.sleep(20 + random.nextInt(200));
                switch (random.nextInt(4)) {
                    case 0 -> inputs.commit(1 + random.nextInt(20));
                    case 1 -> terminateAWorker(chaos, random);
                    case 2 -> redrive(chaos, inputs.broken, random.nextBoolean());
                    default -> { }
                }
            }
            redrive(chaos, inputs.broken, true);
            Eventually.await("every effect is applied", Duration.ofSeconds(90), Duration.ofMillis(100), () -> {
                redrive(chaos, inputs.broken, true); // a failure recorded after the last re-drive
                return db.database.rows("SELECT 1 FROM " + SinkDatabase.TABLE + "_effect_queue q WHERE EXISTS (SELECT"
                        + " FROM " + SinkDatabase.TABLE + " e WHERE e.id = q.id) LIMIT 1").isEmpty();
            });
        } finally {
            workers.forEach(EffectWorker::close);
        }

        List<String> problems = new ArrayList<>();
        Map<String, Integer> counts = new HashMap<>();
        db.query("SELECT id FROM ledger.calls", row -> counts.merge(row.getString(1), 1, Integer::sum));
        for (Map.Entry<String, String> queued : inputs.sinkById.entrySet()) {
            int times = counts.getOrDefault(queued.getKey(), 0);
            if (inputs.stale.contains(queued.getKey()) ? times != 0 : times != 1) {
                problems.add(queued.getKey() + " called " + times + " times");
            }
        }
        Map<String, Long> last = new HashMap<>();
        db.query("SELECT id, sink, part, source_offset, caller FROM ledger.calls ORDER BY seq", row -> {
            String id = row.getString(1);
            String sink = inputs.sinkById.get(id);
            if (!row.getString(5).contains("-" + sink + "-effects-")) {
                problems.add(id + " of sink " + sink + " called by " + row.getString(5));
            }
            if (inputs.broken.contains(id)) {
                return; // re-driven: after the effects queued after it, by design
            }
            String partition = sink + " " + row.getString(3);
            long offset = row.getLong(4);
            Long before = last.put(partition, offset);
            if (before != null && before > offset) {
                problems.add(partition + ": offset " + offset + " called after " + before);
            }
        });
        System.out.println("EffectScheduleTest seed " + seed + ": " + inputs.sinkById.size() + " effects (" + inputs.stale.size()
                + " stale, " + inputs.broken.size() + " re-driven), " + metrics.effectRetries.getCount() + " retries, "
                + problems.size() + " problems");
        assertThat(problems).as("seed %d: %d effects, %d retries", seed, inputs.sinkById.size(),
                metrics.effectRetries.getCount()).isEmpty();
    }

    /** The effects of each sink and partition, committed in offset order, a few at a time. */
    private final class Inputs {
        private final Random random;
        private final Map<String, Long> nextOffset = new HashMap<>();
        final Map<String, String> sinkById = new HashMap<>();
        final Set<String> stale = new HashSet<>();
        final Set<String> broken = new HashSet<>();
        private int flaky;

        Inputs(Random random) {
            this.random = random;
        }

        void commit(int count) throws Exception {
            StringBuilder events = new StringBuilder();
            StringBuilder queue = new StringBuilder();
            List<String> gone = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                String sink = random.nextInt(4) == 0 ? "other" : "ordered";
                // topic null and partition null: a row of an earlier version
                String topic = random.nextInt(10) == 0 ? null : "payments";
                Integer partition = topic == null ? null : random.nextInt(3);
                String key = sink + " " + topic + "/" + partition;
                long offset = nextOffset.merge(key, 1L, Long::sum) - 1;
                String id = sink + "-" + (topic == null ? "legacy" : topic + partition) + "-" + offset;
                String payload = "{}";
                int kind = random.nextInt(40);
                if (kind < 2) {
                    String sequence = "ledger.tries_" + flaky++;
                    db.execute("CREATE SEQUENCE " + sequence);
                    payload = "{\"flaky\":\"" + sequence + "\",\"times\":" + (1 + random.nextInt(4)) + "}";
                } else if (kind < 4) {
                    payload = "{\"sleep\":" + random.nextInt(300) + "}";
                } else if (kind < 5) {
                    payload = "{\"broken\":true}";
                    broken.add(id);
                } else if (kind < 6) {
                    gone.add(id);
                    stale.add(id);
                }
                sinkById.put(id, sink);
                events.append(events.length() == 0 ? "" : ", ").append("('").append(id).append("', '").append(payload)
                        .append("', ").append(quoted(topic)).append(", ").append(partition).append(", ").append(offset)
                        .append(", 'x')");
                queue.append(queue.length() == 0 ? "" : ", ").append("('").append(id).append("', ").append(quoted(topic))
                        .append(", ").append(partition).append(", ").append(offset).append(", '").append(sink)
                        .append("', ").append(random.nextBoolean() ? "NULL" : "'" + FUNCTION + "'").append(")");
            }
            try (Connection connection = db.database.connect()) {
                connection.setAutoCommit(false);
                try (var statement = connection.createStatement()) {
                    statement.execute("INSERT INTO " + SinkDatabase.TABLE + " (id, payload, source_topic, source_partition,"
                            + " source_offset, effect_transaction) VALUES " + events);
                    statement.execute("INSERT INTO " + SinkDatabase.TABLE + "_effect_queue (id, source_topic,"
                            + " source_partition, source_offset, sink_prefix, effect_function) VALUES " + queue);
                    for (String id : gone) { // deleted by hand: a stale queue row
                        statement.execute("DELETE FROM " + SinkDatabase.TABLE + " WHERE id = '" + id + "'");
                    }
                }
                connection.commit();
            }
            db.execute(new EventsTable(SinkDatabase.TABLE).queue().notifyStatement());
        }
    }

    private static String quoted(String text) {
        return text == null ? "NULL" : "'" + text + "'";
    }

    private static void terminateAWorker(Connection chaos, Random random) throws Exception {
        try (var statement = chaos.createStatement()) {
            statement.execute("SELECT pg_terminate_backend(pid) FROM (SELECT pid FROM pg_stat_activity WHERE datname ="
                    + " current_database() AND application_name LIKE '%effects-%' AND pid <> pg_backend_pid()"
                    + " ORDER BY pid OFFSET " + random.nextInt(4) + " LIMIT 1) one");
        }
    }

    /** The operator fixes the cause of failures and re-drives them (retry-failed), of either sink. */
    private static void redrive(Connection chaos, Set<String> broken, boolean fix) throws Exception {
        if (fix) {
            try (PreparedStatement fixed = chaos.prepareStatement(
                    "INSERT INTO ledger.fixed SELECT unnest(?::text[]) ON CONFLICT DO NOTHING")) {
                fixed.setArray(1, chaos.createArrayOf("text", broken.toArray()));
                fixed.execute();
            }
        }
        PendingEffectsTable queue = new EventsTable(SinkDatabase.TABLE).queue();
        for (String sink : SINKS) {
            try (PreparedStatement redrive = chaos.prepareStatement(queue.log().retryFailedStatement())) {
                redrive.setString(1, FUNCTION);
                redrive.setNull(2, java.sql.Types.ARRAY);
                redrive.setNull(3, java.sql.Types.ARRAY);
                redrive.setString(4, sink);
                redrive.setString(5, "EffectScheduleTest");
                redrive.execute();
            }
        }
    }
}
