package io.onceflow.sink.postgres;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.sink.postgres.options.PostgresTableOptions;
import io.onceflow.api.Event;
import io.onceflow.sink.postgres.internal.PostgresConnections;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.EffectBatch;
import io.onceflow.sink.postgres.internal.EffectWorker;
import io.onceflow.sink.postgres.internal.EventsTable;
import io.onceflow.sink.postgres.internal.PendingEffectsTable;
import io.onceflow.testing.Eventually;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
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
            workers.add(EffectWorker.startIfConfigured(config, 0, 1, PostgresSinkMetrics.unregistered()));
            Eventually.await("a worker holds partition 0's head", Duration.ofSeconds(10), Duration.ofMillis(20),
                    () -> !db.database.rows("SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").isEmpty());
            workers.add(EffectWorker.startIfConfigured(config, 1, 1, PostgresSinkMetrics.unregistered()));
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
        EffectBatch batch = new EffectBatch(new EventsTable(config.tables().events()), config.sinkPrefix(), FUNCTION, null, false,
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

    /** A head in partition 0 whose effect fails for a reason not its own, and {@code others} effects in partition 1. */
    private void commitABrokenHeadBeside(PostgresSinkConfig config, int others) throws Exception {
        List<Event> events = new ArrayList<>();
        events.add(event("p0-0", "{\"broken\":true}", "payments", 0, 0));
        for (int offset = 0; offset < others; offset++) {
            events.add(event("p1-" + offset, "{}", "payments", 1, offset));
        }
        db.commitFreshCheckpoint(config, events.toArray(Event[]::new));
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
        EffectBatch batch = new EffectBatch(new EventsTable(config.tables().events()), config.sinkPrefix(), FUNCTION, null, false,
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
        EffectWorker worker = EffectWorker.startIfConfigured(config, 0, 1, PostgresSinkMetrics.unregistered());
        Eventually.await("kept is applied", Duration.ofSeconds(20), Duration.ofMillis(50),
                () -> db.database.rows("SELECT 1 FROM ledger.calls WHERE id = 'kept'").size() == 1);
        org.junit.jupiter.api.Assertions.assertTimeoutPreemptively(Duration.ofSeconds(10), worker::closeAfterDraining,
                "the end of a bounded input waits for a stale row no worker can take");
    }

    /**
     * A batch that locks a partition and finds none of its effects to take does not keep it while it
     * calls another partition's: here partition 0's only queued row is stale (its events row gone),
     * and a batch passes it, takes partition 1, whose head is slow, and waits in that call; an effect
     * queued in partition 0 meanwhile is taken by another batch, otherwise idle. The same happens to
     * any partition that another batch emptied between a batch's list of partitions and its take.
     * (From the third review: the partition stayed locked to the end of the transaction, so the slow
     * effect of one partition held back another while workers were idle.)
     */
    @Test
    void aPartitionFoundEmptyIsNotHeldWhileTheBatchCallsAnothersEffects() throws Exception {
        PostgresSinkConfig config = db.config(db.builder("ordered").setEffectFunction(FUNCTION).setBatchSize(10));
        db.commitFreshCheckpoint(config, event("gone", "{}", "payments", 0, 0),
                event("p1-0", "{\"slow\":true}", "payments", 1, 0));
        db.execute("DELETE FROM " + SinkDatabase.TABLE + " WHERE id = 'gone'");
        EventsTable events = new EventsTable(config.tables().events());
        EffectBatch slow = new EffectBatch(events, config.sinkPrefix(), FUNCTION, null, false, PostgresSinkMetrics.unregistered());
        EffectBatch idle = new EffectBatch(events, config.sinkPrefix(), FUNCTION, null, false, PostgresSinkMetrics.unregistered());
        try (Connection holder = PostgresConnections.open(config, "review-holder");
                Statement hold = holder.createStatement();
                Connection slowWorker = PostgresConnections.open(config, "review-slow-worker");
                Connection idleWorker = PostgresConnections.open(config, "review-idle-worker")) {
            hold.execute("SELECT pg_advisory_lock(42)");
            int[] slowTook = {-1};
            Thread slowBatch = new Thread(() -> {
                try {
                    slowTook[0] = slow.run(slowWorker, 10);
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            });
            slowBatch.start();
            Eventually.await("the batch passed partition 0 and waits in partition 1's slow effect", Duration.ofSeconds(10),
                    Duration.ofMillis(20), () -> !db.database.rows("SELECT 1 FROM pg_locks WHERE locktype = 'advisory'"
                            + " AND NOT granted").isEmpty());
            db.execute("INSERT INTO " + SinkDatabase.TABLE + " (id, payload, source_topic, source_partition, source_offset,"
                    + " effect_transaction) VALUES ('p0-1', '{}', 'payments', 0, 1, 'x')");
            db.execute("INSERT INTO " + SinkDatabase.TABLE + "_effect_queue (id, source_topic, source_partition,"
                    + " source_offset, sink_prefix) VALUES ('p0-1', 'payments', 0, 1, 'ordered')");

            int taken = idle.run(idleWorker, 10);

            hold.execute("SELECT pg_advisory_unlock(42)");
            slowBatch.join(10_000);
            assertThat(taken).as("p0-1, queued in a partition the slow batch found empty").isEqualTo(1);
            assertThat(slowTook[0]).as("p1-0").isEqualTo(1);
        }
    }

    /**
     * A partition whose head keeps failing for a reason that is not about the message (retried) is
     * set aside once its head failed alone, and the worker goes on with the other partitions in
     * batches that grow again: partition 1's 300 effects are applied in a few seconds. (From the third
     * review: the retry of one effect went to the next partition in turn, which went through, so the
     * failing partition was never set aside; each of its failures cut the batch back to one and
     * slept, and partition 1 went on at about one effect per 100 ms.)
     */
    @Test
    void aHeadThatKeepsFailingIsSetAsideAndTheOtherPartitionsGoOnInFullBatches() throws Exception {
        db.execute("CREATE OR REPLACE FUNCTION " + FUNCTION + "(message_id text, payload jsonb) RETURNS jsonb"
                + " LANGUAGE plpgsql AS $$ BEGIN\n"
                + "  IF payload ? 'broken' THEN RAISE EXCEPTION 'not about the message' USING ERRCODE = '55000'; END IF;\n"
                + "  INSERT INTO ledger.calls (id) VALUES (message_id);\n"
                + "  RETURN jsonb_build_object('status', 'applied'); END $$");
        PostgresSinkConfig config = db.config(db.builder("ordered").setEffectFunction(FUNCTION).setBatchSize(100));
        commitABrokenHeadBeside(config, 300);
        PostgresSinkMetrics metrics = PostgresSinkMetrics.unregistered();
        EffectWorker worker = EffectWorker.startIfConfigured(config, 0, 1, metrics);
        try {
            long start = System.nanoTime();
            Eventually.await("partition 1's effects are applied", Duration.ofSeconds(60), Duration.ofMillis(50),
                    () -> db.database.rows("SELECT 1 FROM ledger.calls").size() == 300);
            long seconds = (System.nanoTime() - start) / 1_000_000_000L;
            assertThat(seconds).as("partition 1 applied in full batches, partition 0 set aside (%d retries)",
                    metrics.effectRetries.getCount()).isLessThan(8);
        } finally {
            worker.close();
        }
    }

    /**
     * As {@link #aHeadThatKeepsFailingIsSetAsideAndTheOtherPartitionsGoOnInFullBatches}, with the
     * failure in the keys function, which runs in the statement that takes the batch: an error that
     * is not about the message (here 55000; a statement timeout of a keys function slow on one
     * payload, a missing privilege) failed that statement before the batch knew its partition, so
     * the partition was never set aside, and the worker, which moves on to the next partition only
     * when a batch commits, retried it for ever: the other partition's effects were never applied.
     * (From the review of the keys computed in the take.)
     */
    @Test
    void aHeadWhoseKeysFunctionKeepsFailingIsSetAsideAndTheOtherPartitionsGoOn() throws Exception {
        db.execute("CREATE FUNCTION ledger.account_keys(message_id text, payload jsonb) RETURNS text[]"
                + " LANGUAGE plpgsql AS $$ BEGIN\n"
                + "  IF payload ? 'broken' THEN RAISE EXCEPTION 'not about the message' USING ERRCODE = '55000'; END IF;\n"
                + "  RETURN ARRAY[message_id]; END $$");
        PostgresSinkConfig config = db.config(db.builder("ordered").setEffectFunction(FUNCTION)
                .setEffectKeys("ledger.account_keys").setBatchSize(100));
        commitABrokenHeadBeside(config, 50);
        PostgresSinkMetrics metrics = PostgresSinkMetrics.unregistered();
        EffectWorker worker = EffectWorker.startIfConfigured(config, 0, 1, metrics);
        try {
            Eventually.await("partition 1's effects are applied", Duration.ofSeconds(30), Duration.ofMillis(50),
                    () -> db.database.rows("SELECT 1 FROM ledger.calls").size() == 50);
        } finally {
            worker.close();
        }
        assertThat(db.failedEffects()).as("55000 is no verdict on p0-0").isZero();
        assertThat(db.queuedEffects()).as("p0-0 waits, queued").isEqualTo(1);
    }

    /**
     * The index effects are taken by exists for the longest events table name the sink accepts, and
     * an upgrade from the previous version replaces its index by it: PostgreSQL truncates names at 63
     * bytes, so {@code <queue>_partition_order} was the queue's own name at 50 characters (CREATE
     * INDEX IF NOT EXISTS skipped it, and the start's check found the table), and at 49 the old
     * index's name too (the upgrade's check found the old index and kept it). Without the index, the
     * list of partitions and every take read the whole backlog. (From the third review.)
     */
    @Test
    void theQueueOfTheLongestEventsTableNamesHasItsPartitionOrderIndex() throws Exception {
        Map<String, Integer> indexes = new TreeMap<>();
        for (int length : new int[] {PostgresTableOptions.MAX_EVENTS_NAME_LENGTH, PostgresTableOptions.MAX_EVENTS_NAME_LENGTH - 1}) {
            String table = ("events_of_a_rather_long_name_" + "x".repeat(60)).substring(0, length);
            db.config(db.builder("fresh" + length).setTable(table).setEffectFunction(FUNCTION));
            indexes.put("a new queue, events table of " + length, partitionOrderIndexes(table + PostgresTableOptions.EFFECT_QUEUE_SUFFIX));
        }
        for (int length : new int[] {PostgresTableOptions.MAX_EVENTS_NAME_LENGTH, PostgresTableOptions.MAX_EVENTS_NAME_LENGTH - 1}) {
            String upgraded = ("upgraded_" + "y".repeat(60)).substring(0, length);
            String queue = upgraded + PostgresTableOptions.EFFECT_QUEUE_SUFFIX;
            db.config(db.builder("upgraded" + length).setTable(upgraded).setEffectFunction(FUNCTION));
            // the previous version's queue: all its columns, and the source order index in place of the
            // new one (at 50 characters, that version could not create it: its name was the queue's)
            for (String index : db.database.rows("SELECT indexrelid::regclass FROM pg_index WHERE indrelid = '" + queue
                    + "'::regclass AND NOT indisprimary")) {
                db.execute("DROP INDEX " + index);
            }
            db.execute("CREATE INDEX IF NOT EXISTS " + queue + "_source_order ON " + queue + " (source_partition, source_offset)");
            db.config(db.builder("upgraded" + length).setTable(upgraded).setEffectFunction(FUNCTION)); // the upgrade's start
            indexes.put("an upgraded queue, events table of " + length, partitionOrderIndexes(queue));
        }
        assertThat(indexes).as("partition order indexes of each queue").containsOnly(
                Map.entry("a new queue, events table of 49", 1), Map.entry("a new queue, events table of 50", 1),
                Map.entry("an upgraded queue, events table of 49", 1), Map.entry("an upgraded queue, events table of 50", 1));
    }

    /** How many indexes of the queue {@code queue} key partitions by coalesce(source_topic, ''), as the batches read them. */
    private int partitionOrderIndexes(String queue) throws SQLException {
        return db.database.rows("SELECT 1 FROM pg_index WHERE indrelid = '" + queue + "'::regclass AND NOT indisprimary"
                + " AND pg_get_indexdef(indexrelid) LIKE '%COALESCE(source_topic%'").size();
    }

    private static Event event(String id, String payload, String topic, int partition, long offset) {
        return new Event(id, payload.getBytes(StandardCharsets.UTF_8), topic, partition, offset, 0L, new HashMap<>());
    }
}
