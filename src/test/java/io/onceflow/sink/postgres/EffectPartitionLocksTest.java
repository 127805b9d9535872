package io.onceflow.sink.postgres;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.api.Event;
import io.onceflow.sink.postgres.internal.PostgresConnections;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.effects.EffectBatch;
import io.onceflow.sink.postgres.internal.effects.EffectWorker;
import io.onceflow.sink.postgres.internal.schema.EventsTable;
import io.onceflow.sink.postgres.internal.schema.PendingEffectsTable;
import io.onceflow.testing.Eventually;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The partition locks of the effect batches (EffectBatch, PendingEffectsTable.takeStatement), against a real
 * server: a partition whose effect another worker holds, calls or retries holds back only itself,
 * with a backlog larger than a batch too; the queue rows of an upgrade carry their topic; a queue row
 * whose events row is gone does not hold a bounded job's end. (From an adversarial review: the first,
 * second and last failed on the head rule this replaced.)
 */
class EffectPartitionLocksTest {
    private static final String FUNCTION = "ledger.record_call";
    private final SinkDatabase db = new SinkDatabase();

    @BeforeEach
    void createTheFunction() throws Exception {
        db.execute("CREATE SCHEMA ledger");
        db.execute("CREATE TABLE ledger.calls (seq bigserial PRIMARY KEY, id text NOT NULL)");
        // the head of partition 0 waits for advisory lock 42 (a slow effect: a lock wait on the
        // business tables, a long computation), up to the statement timeout
        db.execute("CREATE FUNCTION " + FUNCTION + "(message_id text, payload jsonb) RETURNS jsonb LANGUAGE plpgsql"
                + " AS $$ BEGIN\n"
                + "  IF payload ? 'slow' THEN PERFORM pg_advisory_xact_lock(42); END IF;\n"
                + "  INSERT INTO ledger.calls (id) VALUES (message_id);\n"
                + "  RETURN jsonb_build_object('status', 'applied'); END $$");
    }

    /**
     * Partition 0 has a backlog larger than a batch, and its head is held by one worker (its effect
     * is slow). The other worker passes partition 0 by and applies partition 1's effect.
     */
    @Test
    void aHeldHeadBlocksOnlyItsOwnPartitionEvenWithABacklogLargerThanABatch() throws Exception {
        PostgresSinkConfig config = db.config(db.builder("ordered").setEffectFunction(FUNCTION).setBatchSize(10));
        List<Event> events = new ArrayList<>();
        for (int offset = 0; offset < 40; offset++) {
            events.add(event("p0-" + offset, offset == 0 ? "{\"slow\":true}" : "{}", "payments", 0, offset));
        }
        events.add(event("p1-0", "{}", "payments", 1, 0));
        db.commitFreshCheckpoint(config, events.toArray(Event[]::new));

        List<EffectWorker> workers = new ArrayList<>();
        try (Connection holder = PostgresConnections.open(config, "review-holder");
                Statement hold = holder.createStatement()) {
            hold.execute("SELECT pg_advisory_lock(42)");
            workers.add(EffectWorker.startIfConfigured(config, 0, PostgresSinkMetrics.unregistered()));
            Eventually.await("a worker holds partition 0's head", Duration.ofSeconds(10), Duration.ofMillis(20),
                    () -> !db.database.rows("SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").isEmpty());
            workers.add(EffectWorker.startIfConfigured(config, 1, PostgresSinkMetrics.unregistered()));
            Thread.sleep(5000); // ten polls of the idle worker
            List<String> calls = db.database.rows("SELECT id FROM ledger.calls");
            assertThat(calls).as("partition 1 goes on while partition 0's head is held").contains("p1-0");
        } finally {
            workers.forEach(EffectWorker::close);
        }
    }

    /** The same, deterministic: another transaction holds partition 0; a batch takes partition 1's effect. */
    @Test
    void aBatchSkipsAPartitionWhoseHeadAnotherSessionHolds() throws Exception {
        PostgresSinkConfig config = db.config(db.builder("ordered").setEffectFunction(FUNCTION).setBatchSize(10));
        List<Event> events = new ArrayList<>();
        for (int offset = 0; offset < 40; offset++) {
            events.add(event("p0-" + offset, "{}", "payments", 0, offset));
        }
        events.add(event("p1-0", "{}", "payments", 1, 0));
        db.commitFreshCheckpoint(config, events.toArray(Event[]::new));
        EffectBatch batch = new EffectBatch(new EventsTable(config.tables().events()), config.sinkPrefix(), FUNCTION, null,
                PostgresSinkMetrics.unregistered());
        try (Connection holder = PostgresConnections.open(config, "review-holder");
                Connection worker = PostgresConnections.open(config, "review-worker")) {
            holder.setAutoCommit(false);
            holdPartition(holder, new EventsTable(SinkDatabase.TABLE).queue(), "payments", 0);
            int taken = batch.run(worker, 10);
            assertThat(taken).as("p1-0, the head of a partition nobody holds").isEqualTo(1);
            holder.rollback();
        }
    }

    /** Takes the partition's lock in {@code holder}'s open transaction, as a batch does. */
    private static void holdPartition(Connection holder, PendingEffectsTable queue, String topic, int partition)
            throws Exception {
        try (PreparedStatement hold = holder.prepareStatement(queue.tryLockPartitionStatement())) {
            hold.setString(1, topic);
            hold.setInt(2, partition);
            try (ResultSet locked = hold.executeQuery()) {
                locked.next();
                assertThat(locked.getBoolean(1)).as("the holder has the partition").isTrue();
            }
        }
    }

    /**
     * A batch whose look at the queue came before another transaction let go of a partition, and
     * that got the partition's lock just after, must take the partition from its head on (the rows
     * the other transaction left). (From a review: the row-by-row lock of an earlier version took
     * effects past the head here.) The holder lets go while the batch looks at a partition of 200k
     * queued effects.
     */
    @Test
    void aBatchThatGetsAPartitionsLockOnlyPastItsHeadTakesNoneOfIt() throws Exception {
        PostgresSinkConfig config = db.config(db.builder("ordered").setEffectFunction(FUNCTION).setBatchSize(10));
        db.execute("INSERT INTO " + SinkDatabase.TABLE + " (id, payload, source_topic, source_partition, source_offset,"
                + " effect_transaction) SELECT 'p0-' || n, '{}', 'payments', 0, n, 'x' FROM generate_series(0, 199999) n");
        db.execute("INSERT INTO " + SinkDatabase.TABLE + "_effect_queue (id, source_topic, source_partition, source_offset,"
                + " sink_prefix) SELECT 'p0-' || n, 'payments', 0, n, 'ordered' FROM generate_series(0, 199999) n");
        db.execute("ANALYZE");
        EffectBatch batch = new EffectBatch(new EventsTable(config.tables().events()), config.sinkPrefix(), FUNCTION, null,
                PostgresSinkMetrics.unregistered());
        PendingEffectsTable queue = new EventsTable(SinkDatabase.TABLE).queue();
        try (Connection holder = PostgresConnections.open(config, "review-holder");
                Connection worker = PostgresConnections.open(config, "review-worker")) {
            holder.setAutoCommit(false);
            holdPartition(holder, queue, "payments", 0);
            Thread release = new Thread(() -> {
                try {
                    Thread.sleep(30);
                    holder.commit();
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            });
            release.start();
            batch.run(worker, 10);
            release.join();
        }
        assertThat(db.database.rows("SELECT id FROM ledger.calls ORDER BY seq")).as("none, or from the head on")
                .isSubsetOf("p0-0", "p0-1", "p0-2", "p0-3", "p0-4", "p0-5", "p0-6", "p0-7", "p0-8", "p0-9");
    }

    /**
     * An events table of the version before the queue: the start creates the queue and moves the
     * pending rows and the failures into it, each with its topic (without it, a re-driven failure
     * would be a partition of its own, "/0", not ordered with "payments/0").
     */
    @Test
    void aLegacyFailureJoinsTheQueueWithItsTopic() throws Exception {
        PostgresSinkBuilder sink = db.builder("ordered").setEffectFunction(FUNCTION);
        db.config(sink);
        db.execute("DROP TABLE " + SinkDatabase.TABLE + "_effect_queue");
        db.execute("DROP TABLE " + SinkDatabase.TABLE + "_effect_log");
        db.execute("CREATE INDEX " + SinkDatabase.TABLE + "_pending_effects ON " + SinkDatabase.TABLE
                + " (effect_transaction) WHERE result IS NULL AND effect_transaction IS NOT NULL");
        db.execute("INSERT INTO " + SinkDatabase.TABLE + " (id, payload, source_topic, source_partition, source_offset,"
                + " effect_transaction, result) VALUES ('f1', '{}', 'payments', 0, 1, 'old-checkpoint-3',"
                + " '{\"status\":\"failed\",\"sqlstate\":\"P0001\",\"error\":\"x\"}'),"
                + " ('q2', '{}', 'payments', 0, 2, 'old-checkpoint-3', NULL)");
        db.config(sink); // the upgrade's first start
        assertThat(db.database.rows("SELECT id, coalesce(source_topic, 'NULL') FROM " + SinkDatabase.TABLE
                + "_effect_queue ORDER BY id")).containsExactly("f1 payments", "q2 payments");
    }

    /**
     * A stale queue row (its events row deleted by hand) is never taken: the end of a bounded input
     * does not wait FINAL_DRAIN_LIMIT (10 min) for it.
     */
    @Test
    void aStaleQueueRowDoesNotHoldABoundedJobsEndForTenMinutes() throws Exception {
        PostgresSinkConfig config = db.config(db.builder("ordered").setEffectFunction(FUNCTION));
        db.commitFreshCheckpoint(config, event("gone", "{}", "payments", 0, 0), event("kept", "{}", "payments", 0, 1));
        db.execute("DELETE FROM " + SinkDatabase.TABLE + " WHERE id = 'gone'");
        EffectWorker worker = EffectWorker.startIfConfigured(config, 0, PostgresSinkMetrics.unregistered());
        Eventually.await("kept is applied", Duration.ofSeconds(20), Duration.ofMillis(50),
                () -> db.database.rows("SELECT 1 FROM ledger.calls WHERE id = 'kept'").size() == 1);
        org.junit.jupiter.api.Assertions.assertTimeoutPreemptively(Duration.ofSeconds(10), worker::closeAfterDraining,
                "the end of a bounded input waits for a stale row no worker can take");
    }

    private static Event event(String id, String payload, String topic, int partition, long offset) {
        return new Event(id, payload.getBytes(StandardCharsets.UTF_8), topic, partition, offset, 0L, new HashMap<>());
    }
}
