package io.onceflow.sink.postgres;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.api.Event;
import io.onceflow.sink.postgres.internal.PostgresConnections;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.PostgresCommittable;
import io.onceflow.sink.postgres.internal.EffectBatch;
import io.onceflow.sink.postgres.internal.EventsTable;
import io.onceflow.sink.postgres.internal.PostgresExactlyOnceWriter;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.util.OptionalLong;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A partition's effects are applied in offset order whatever the number of workers, also while one
 * worker retries a partition's head: against a real server, with a function that records the order
 * in which its calls commit (a rolled-back call leaves no record) and fails a head with SQLSTATE
 * 40001 (a serialization failure: retried) a few times before it goes through.
 */
class EffectOrderTest {
    private static final String FUNCTION = "ledger.record_call";
    private static final int PARTITIONS = 3;
    private static final int PER_PARTITION = 60;
    private static final Duration PATIENCE = Duration.ofSeconds(60);

    private final SinkDatabase db = new SinkDatabase();

    @BeforeEach
    void createTheFunction() throws Exception {
        db.execute("CREATE SCHEMA ledger");
        db.execute("CREATE TABLE ledger.calls (seq bigserial PRIMARY KEY, id text NOT NULL, topic text,"
                + " source_partition int NOT NULL, source_offset bigint NOT NULL)");
        db.execute("CREATE SEQUENCE ledger.head_tries"); // nextval is never rolled back: it counts every try
        db.execute("CREATE FUNCTION " + FUNCTION + "(message_id text, payload jsonb) RETURNS jsonb LANGUAGE plpgsql"
                + " AS $$ BEGIN\n"
                + "  PERFORM pg_sleep(0.002);\n"
                + "  IF payload ? 'flaky' AND nextval('ledger.head_tries') <= 6 THEN\n"
                + "    RAISE EXCEPTION 'could not serialize' USING ERRCODE = '40001';\n"
                + "  END IF;\n"
                + "  INSERT INTO ledger.calls (id, topic, source_partition, source_offset) SELECT e.id, e.source_topic,"
                + "    e.source_partition, e.source_offset FROM onceflow_events e WHERE e.id = message_id;\n"
                + "  RETURN jsonb_build_object('status', 'applied'); END $$");
    }

    @Test
    void eachPartitionIsAppliedInOffsetOrderByFourWorkersWhileOneRetriesItsHead() throws Exception {
        PostgresSinkConfig config = db.config(db.builder("ordered").setEffectFunction(FUNCTION).setBatchSize(10));
        List<Event> events = new ArrayList<>();
        for (int offset = 0; offset < PER_PARTITION; offset++) {
            for (int partition = 0; partition < PARTITIONS; partition++) {
                // partition 0's head fails a few times, then goes through
                String payload = partition == 0 && offset == 0 ? "{\"flaky\":true}" : "{}";
                events.add(event("p" + partition + "-" + offset, payload, "payments", partition, offset));
            }
        }
        // another topic's partition 0: a partition of its own, not ordered with payments' partition 0
        events.add(event("r0-0", "{}", "refunds", 0, 0));
        db.commitFreshCheckpoint(config, events.toArray(Event[]::new));

        SinkDatabase.runEffectWorkersUntil(config, 4, "every effect is applied", PATIENCE, () -> db.queuedEffects() == 0);

        assertThat(db.effectStatuses().values()).hasSize(events.size()).containsOnly("applied");
        List<String> outOfOrder = new ArrayList<>();
        db.query("SELECT topic, source_partition, source_offset, previous FROM (SELECT topic, source_partition,"
                + " source_offset, lag(source_offset) OVER (PARTITION BY topic, source_partition ORDER BY seq) AS previous"
                + " FROM ledger.calls) c WHERE source_offset <> coalesce(previous + 1, 0)",
                row -> outOfOrder.add(row.getString(1) + "/" + row.getInt(2) + ": offset " + row.getLong(3)
                        + " after " + row.getString(4)));
        assertThat(outOfOrder).as("each partition's calls committed in offset order, each once").isEmpty();
        assertThat(db.database.rows("SELECT count(*) FROM ledger.calls")).containsExactly(String.valueOf(events.size()));
        assertThat(Long.parseLong(db.database.rows("SELECT last_value FROM ledger.head_tries").get(0))).as("the head was retried")
                .isGreaterThan(6);
    }

    /**
     * Per-account order rests on the partition's order alone, so nothing waits for a predecessor that
     * never comes: a message dead-lettered before the sink (offset 1: no row), a rejected effect and
     * a failed one (verdicts) leave the partition's later effects to go on, in offset order, by two
     * workers. (The per-account sequence scheme this replaced wedged on the first of these.)
     */
    @Test
    void aPartitionGoesOnPastADeadLetteredARejectedAndAFailedPredecessorInOffsetOrder() throws Exception {
        db.execute("CREATE FUNCTION ledger.verdicts(message_id text, payload jsonb) RETURNS jsonb LANGUAGE plpgsql"
                + " AS $$ BEGIN\n"
                + "  IF payload ? 'fail' THEN RAISE EXCEPTION 'bad amount' USING ERRCODE = '22023'; END IF;\n"
                + "  IF payload ? 'reject' THEN RETURN jsonb_build_object('status', 'rejected'); END IF;\n"
                + "  RETURN " + FUNCTION + "(message_id, payload); END $$");
        PostgresSinkConfig config = db.config(db.builder("verdicts").setEffectFunction("ledger.verdicts"));
        List<Event> events = new ArrayList<>();
        events.add(event("m0", "{}", "payments", 0, 0)); // offset 1 was dead-lettered: it never reaches the sink
        events.add(event("m2", "{\"reject\":true}", "payments", 0, 2));
        events.add(event("m3", "{\"fail\":true}", "payments", 0, 3));
        for (int offset = 4; offset < 8; offset++) {
            events.add(event("m" + offset, "{}", "payments", 0, offset));
        }
        db.commitFreshCheckpoint(config, events.toArray(Event[]::new));

        SinkDatabase.runEffectWorkersUntil(config, 2, "every effect decided", PATIENCE,
                () -> db.queuedEffects() == 0 && db.effectStatuses().values().stream().allMatch(s -> s != null));
        assertThat(db.effectStatuses()).containsEntry("m2", "rejected").containsEntry("m3", "failed")
                .containsEntry("m0", "applied").containsEntry("m7", "applied");
        assertThat(db.database.rows("SELECT source_offset FROM ledger.calls ORDER BY seq"))
                .as("the applied ones, once each, in offset order").containsExactly("0", "4", "5", "6", "7");
    }

    /**
     * One checkpoint's rows of a partition, split between two writer subtasks by id, are committed
     * moments apart: no effect of the partition committed by the first may be applied before the
     * second commits the earlier offsets. Meanwhile the effects committed before the checkpoint's
     * transactions were prepared go on. Fails with {@link
     * io.onceflow.sink.postgres.internal.EffectBatch}'s settled snapshot removed (tried: the
     * later offsets were applied first).
     */
    @Test
    void aCheckpointsLaterOffsetsWaitForTheWriterThatCommitsItsEarlierOnes() throws Exception {
        PostgresSinkConfig config = db.config(db.builder("split").setEffectFunction(FUNCTION));
        EventsTable events = new EventsTable(config.tables().events());
        EffectBatch worker = new EffectBatch(events, config.sinkPrefix(), config.tables().effectFunction(), null, false,
                PostgresSinkMetrics.unregistered());
        // each pair of writers is closed before its checkpoint commits, their effect workers with them
        PostgresCommittable[] first = new PostgresCommittable[2];
        try (PostgresExactlyOnceWriter zero = SinkDatabase.writer(config, db.attempt(0, 2, OptionalLong.empty()));
                PostgresExactlyOnceWriter one = SinkDatabase.writer(config, db.attempt(1, 2, OptionalLong.empty()))) {
            first[0] = PostgresTwoPhaseCommitTest.checkpoint(zero, 1, event("early-0", "{}", "payments", 1, 0),
                    event("early-1", "{}", "payments", 1, 1));
            first[1] = PostgresTwoPhaseCommitTest.checkpoint(one, 1, event("early-2", "{}", "payments", 2, 0));
        }
        PostgresTwoPhaseCommitTest.commit(config, first);
        try (Connection connection = PostgresConnections.open(config, "effects-test")) {
            // partitions 1 and 2 are this session's: the next writers' own workers pass them
            for (int partition : new int[] {1, 2}) {
                try (PreparedStatement lock = connection.prepareStatement(events.queue().tryLockPartitionStatement()
                        .replace("pg_try_advisory_xact_lock", "pg_advisory_lock"))) {
                    lock.setString(1, "payments");
                    lock.setInt(2, partition);
                    lock.execute();
                }
            }
            // the worker's snapshot before checkpoint 2's transactions are prepared
            assertThat(worker.run(connection, 1)).isEqualTo(1);
            PostgresCommittable fromZero;
            PostgresCommittable fromOne;
            try (PostgresExactlyOnceWriter zero = SinkDatabase.writer(config, db.attempt(0, 2, OptionalLong.empty()));
                    PostgresExactlyOnceWriter one = SinkDatabase.writer(config, db.attempt(1, 2, OptionalLong.empty()))) {
                // checkpoint 2: partition 0's offsets 1 and 3 by subtask 0, 0 and 2 by subtask 1
                fromZero = PostgresTwoPhaseCommitTest.checkpoint(zero, 2, event("late-1", "{}", "payments", 0, 1),
                        event("late-3", "{}", "payments", 0, 3));
                fromOne = PostgresTwoPhaseCommitTest.checkpoint(one, 2, event("late-0", "{}", "payments", 0, 0),
                        event("late-2", "{}", "payments", 0, 2));
            }
            PostgresTwoPhaseCommitTest.commit(config, fromZero);

            assertThat(drain(worker, connection)).as("checkpoint 1's other effects, committed before").isEqualTo(2);
            assertThat(worker.run(connection, 10)).as("while subtask 1 has not committed checkpoint 2").isZero();
            PostgresTwoPhaseCommitTest.commit(config, fromOne);
            assertThat(drain(worker, connection)).as("once it has").isEqualTo(4);
        }
        assertThat(db.database.rows("SELECT id FROM ledger.calls WHERE id LIKE 'late-%' ORDER BY seq"))
                .containsExactly("late-0", "late-1", "late-2", "late-3");
    }

    /**
     * While a prepared transaction of the sink stays (a checkpoint aborted after some writers
     * prepared: they commit at the next completed one), the effects committed before it was prepared
     * go on, however many batches that takes: the worker keeps the snapshot that sees them. (It was
     * the first one the cap of kept snapshots dropped: every effect stopped after 63 batches.)
     */
    @Test
    void effectsCommittedBeforeAPrepareGoOnForAsLongAsItStaysPrepared() throws Exception {
        PostgresSinkConfig config = db.config(db.builder("long").setEffectFunction(FUNCTION));
        EventsTable events = new EventsTable(config.tables().events());
        Event[] backlog = new Event[100];
        for (int offset = 0; offset < backlog.length; offset++) {
            backlog[offset] = event("b" + offset, "{}", "payments", 0, offset);
        }
        db.commitFreshCheckpoint(config, backlog);
        EffectBatch worker = new EffectBatch(events, config.sinkPrefix(), config.tables().effectFunction(), null, false,
                PostgresSinkMetrics.unregistered());
        try (Connection connection = PostgresConnections.open(config, "effects-test")) {
            // partition 0 is this session's: the restored writer's own worker passes it
            try (PreparedStatement lock = connection.prepareStatement(events.queue().tryLockPartitionStatement()
                    .replace("pg_try_advisory_xact_lock", "pg_advisory_lock"))) {
                lock.setString(1, "payments");
                lock.setInt(2, 0);
                lock.execute();
            }
            assertThat(worker.run(connection, 1)).isEqualTo(1);
            PostgresCommittable pending;
            try (PostgresExactlyOnceWriter writer = db.restoredWriter(config, 1)) {
                pending = PostgresTwoPhaseCommitTest.checkpoint(writer, 2, event("later", "{}", "payments", 5, 0));
            }
            int applied = 0;
            for (int batch = 0; batch < 80; batch++) {
                applied += worker.run(connection, 1);
            }
            assertThat(applied).as("effects applied in 80 batches while the transaction stays prepared").isEqualTo(80);
            PostgresTwoPhaseCommitTest.commit(config, pending);
        }
    }

    private static int drain(EffectBatch worker, Connection connection) throws Exception {
        int total = 0;
        for (int taken = worker.run(connection, 10); taken > 0; taken = worker.run(connection, 10)) {
            total += taken;
        }
        return total;
    }

    private static Event event(String id, String payload, String topic, int partition, long offset) {
        return new Event(id, payload.getBytes(StandardCharsets.UTF_8), topic, partition, offset, 0L, new HashMap<>());
    }
}
