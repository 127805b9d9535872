package io.onceflow.sink.postgres;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.api.Event;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.EffectWorker;
import io.onceflow.testing.Eventually;
import io.onceflow.testing.TestPostgres;
import io.onceflow.sink.postgres.internal.EventsTable;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.HashMap;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A failover under a running effect worker to a copy of the server that was behind (an asynchronous
 * replica promoted, a restored backup): the effects the worker applied after the copy are queued
 * there again, their changes lost. The worker sees the server changed when it reconnects, and
 * applies none of them: applying them again could give another outcome than the one recorded before.
 * (Issue #30, hole D: workers reconnected without checking the server.)
 */
class EffectServerChangeTest {
    private static final String FUNCTION = "ledger.record_call";

    @TempDir
    Path directory;

    @Test
    void aWorkerAppliesNothingOnAServerThatLostItsCommits() throws Exception {
        try (TestPostgres server = TestPostgres.start(directory.resolve("live"))) {
            SinkDatabase db = recordingCalls(server);
            PostgresSinkConfig config = db.config(db.builder("ledger").setEffectFunction(FUNCTION));
            db.commitFreshCheckpoint(config, tenEvents());
            server.copyTo(directory.resolve("behind"));

            try (EffectWorker worker = EffectWorker.startIfConfigured(config, 0, 1, PostgresSinkMetrics.unregistered())) {
                Eventually.await("the worker applied the effects on the live server", Duration.ofSeconds(30),
                        Duration.ofMillis(50), () -> db.queuedEffects() == 0);
                assertThat(db.database.rows("SELECT count(*) FROM ledger.calls")).containsExactly("10");

                server.failOverTo(directory.resolve("behind"));
                Eventually.await("the copy is back", Duration.ofSeconds(30), Duration.ofMillis(100),
                        () -> db.queuedEffects() == 10);
                Thread.sleep(3000); // the worker reconnects within a second, and would have applied them

                assertThat(db.database.rows("SELECT count(*) FROM ledger.calls")).as("applied again on the copy")
                        .containsExactly("0");
                assertThat(db.queuedEffects()).isEqualTo(10);
            }
            // a restart of the run: the copy has the run's timeline and a counter past the run's id, so a new
            // worker cannot tell it from the server it replaced (docs/failover.md: what this cannot see)
            try (EffectWorker restarted = EffectWorker.startIfConfigured(config, 0, 1, PostgresSinkMetrics.unregistered())) {
                Eventually.await("the restarted worker applies them", Duration.ofSeconds(30), Duration.ofMillis(50),
                        () -> db.queuedEffects() == 0);
            }
            assertThat(db.database.rows("SELECT count(*) FROM ledger.calls")).containsExactly("10");
        }
    }

    /**
     * A batch that rolled back is no commit the server must have. The worker applied five effects,
     * then a copy was taken; after it, the worker's batch of a sixth effect failed (40001, rolled
     * back) on the live server. The copy has all the worker committed: failed over to it, the worker
     * must go on and apply the sixth effect there. It refused: the batch's transaction id was taken
     * in the transaction and kept as the worker's newest commit although it rolled back.
     */
    @Test
    void aBatchThatRolledBackIsNoCommitTheNewServerMustHave() throws Exception {
        try (TestPostgres server = TestPostgres.start(directory.resolve("live"))) {
            SinkDatabase db = new SinkDatabase(server.newDatabase());
            db.execute("CREATE SCHEMA ledger");
            db.execute("CREATE TABLE ledger.calls (seq bigserial PRIMARY KEY, id text NOT NULL)");
            db.execute("CREATE TABLE ledger.hold (id text PRIMARY KEY)");
            db.execute("CREATE SEQUENCE ledger.attempts");
            db.execute("CREATE FUNCTION " + FUNCTION + "(message_id text, payload jsonb) RETURNS jsonb LANGUAGE plpgsql"
                    + " AS $$ BEGIN IF EXISTS (SELECT FROM ledger.hold h WHERE h.id = message_id) THEN"
                    + " PERFORM nextval('ledger.attempts'); RAISE EXCEPTION 'try again' USING ERRCODE = '40001'; END IF;"
                    + " INSERT INTO ledger.calls (id) VALUES (message_id);"
                    + " RETURN jsonb_build_object('status', 'applied'); END $$");
            db.execute("INSERT INTO ledger.hold VALUES ('held')");
            PostgresSinkConfig config = db.config(db.builder("ledger").setEffectFunction(FUNCTION));
            Event[] events = new Event[6];
            for (int i = 0; i < 5; i++) {
                events[i] = event("m" + i, 0, i);
            }
            events[5] = event("held", 1, 0);
            db.commitFreshCheckpoint(config, events);

            try (EffectWorker worker = EffectWorker.startIfConfigured(config, 0, 1, PostgresSinkMetrics.unregistered())) {
                Eventually.await("the worker applied m0..m4", Duration.ofSeconds(30), Duration.ofMillis(50),
                        () -> db.database.rows("SELECT 1 FROM ledger.calls").size() == 5);
                server.copyTo(directory.resolve("behind"));
                long attempts = attempts(db);
                Eventually.await("a batch of 'held' rolled back on the live server after the copy",
                        Duration.ofSeconds(60), Duration.ofMillis(50), () -> attempts(db) > attempts);
                Thread.sleep(1000); // the worker's next turns (partition 1 set aside) take nothing and succeed

                server.failOverTo(directory.resolve("behind"));
                Eventually.await("the copy is back", Duration.ofSeconds(30), Duration.ofMillis(100),
                        () -> db.queuedEffects() == 1);
                db.execute("DELETE FROM ledger.hold"); // the cause of the retries is fixed
                Eventually.await("'held' applied on the copy, which lost nothing the worker committed",
                        Duration.ofSeconds(60), Duration.ofMillis(100), () -> db.queuedEffects() == 0);
            }
            assertThat(db.database.rows("SELECT id FROM ledger.calls ORDER BY seq"))
                    .containsExactly("m0", "m1", "m2", "m3", "m4", "held");
        }
    }

    /**
     * Two workers of one sink (parallelism 2), both connected before the effects were applied, and a
     * failover to a replica that was behind, promoted (a new timeline). The one that applied them
     * refuses the replica that lost them; the other had committed nothing after the copy was taken,
     * so its own watch has no sign: it must see the run's (the run was registered on the old
     * timeline), or it applies all of them again (as it did when the watch was each worker's own).
     * A restart of the job is the same run: its workers refuse too; a new submission applies them.
     */
    @Test
    void aWorkerThatAppliedNoneOfTheLostEffectsDoesNotApplyThemAgainEither() throws Exception {
        try (TestPostgres server = TestPostgres.start(directory.resolve("live"))) {
            SinkDatabase db = recordingCalls(server);
            db.execute("CREATE ROLE other_worker LOGIN SUPERUSER");
            PostgresSinkConfig config = db.config(db.builder("ledger").setEffectFunction(FUNCTION));
            // the same sink, connecting as another role: the test keeps it from connecting for a while
            PostgresSinkConfig otherConfig = db.builderAs("ledger", "other_worker").setEffectFunction(FUNCTION).build()
                    .config().withRun(config.run());
            db.commitFreshCheckpoint(config, tenEvents());

            EffectWorker other;
            EffectWorker worker;
            // the partition's lock, held: both workers connect (and read the server) before any is applied
            try (Connection holder = db.database.connect()) {
                holder.setAutoCommit(false);
                try (PreparedStatement lock = holder.prepareStatement(
                        new EventsTable(config.tables().events()).queue().tryLockPartitionStatement())) {
                    lock.setString(1, "payments");
                    lock.setInt(2, 0);
                    try (ResultSet locked = lock.executeQuery()) {
                        locked.next();
                        assertThat(locked.getBoolean(1)).isTrue();
                    }
                }
                other = EffectWorker.startIfConfigured(otherConfig, 1, 1, PostgresSinkMetrics.unregistered());
                worker = EffectWorker.startIfConfigured(config, 0, 1, PostgresSinkMetrics.unregistered());
                Eventually.await("both workers connected", Duration.ofSeconds(30), Duration.ofMillis(50),
                        () -> db.database.rows("SELECT 1 FROM pg_stat_activity WHERE datname = current_database()"
                                + " AND application_name LIKE '%effects-%'").size() >= 2);
                Thread.sleep(1000);
                assertThat(db.queuedEffects()).isEqualTo(10);
                db.execute("ALTER ROLE other_worker NOLOGIN"); // its session stays; it cannot reconnect
            }
            try {
                server.copyTo(directory.resolve("behind"));
                Eventually.await("the first worker applied them on the live server", Duration.ofSeconds(30),
                        Duration.ofMillis(50), () -> db.queuedEffects() == 0);
                assertThat(db.database.rows("SELECT count(*) FROM ledger.calls")).containsExactly("10");

                server.failOverToPromoted(directory.resolve("behind"));
                Eventually.await("the copy is back", Duration.ofSeconds(30), Duration.ofMillis(100),
                        () -> db.queuedEffects() == 10);
                db.execute("ALTER ROLE other_worker LOGIN");
                Eventually.await("the other worker reconnected", Duration.ofSeconds(60), Duration.ofMillis(100),
                        () -> !db.database.rows("SELECT 1 FROM pg_stat_activity WHERE usename = 'other_worker'").isEmpty());
                Thread.sleep(3000);
                assertThat(db.database.rows("SELECT id FROM ledger.calls ORDER BY seq")).as("applied again on the copy")
                        .isEmpty();
            } finally {
                worker.close();
                other.close();
            }
            try (EffectWorker restarted = EffectWorker.startIfConfigured(config, 0, 1, PostgresSinkMetrics.unregistered())) {
                Thread.sleep(2000);
                assertThat(db.database.rows("SELECT id FROM ledger.calls")).as("applied by a restart of the run").isEmpty();
            }
            PostgresSinkConfig resubmitted = SinkDatabase.newRun(config);
            try (EffectWorker fresh = EffectWorker.startIfConfigured(resubmitted, 0, 1, PostgresSinkMetrics.unregistered())) {
                Eventually.await("a new submission applies them", Duration.ofSeconds(30), Duration.ofMillis(50),
                        () -> db.queuedEffects() == 0);
            }
            assertThat(db.database.rows("SELECT count(*) FROM ledger.calls")).containsExactly("10");
        }
    }

    /**
     * The check at a reconnect fails without the connection failing (here the server's
     * transaction-id counter cannot be read: a function shadowed on the copy's search_path stands
     * for any error of that statement that is not a lost connection, a statement timeout on a
     * loaded, just promoted server too). The worker kept the connection it had opened before the
     * check, and its next turn used it unchecked: it applied the ten lost effects again.
     */
    @Test
    void aWorkerThatCouldNotCheckTheServerAppliesNothingThere() throws Exception {
        try (TestPostgres server = TestPostgres.start(directory.resolve("live"))) {
            SinkDatabase db = recordingCalls(server);
            PostgresSinkConfig config = db.config(db.builder("ledger").setEffectFunction(FUNCTION));
            db.commitFreshCheckpoint(config, tenEvents());
            String database = db.database.rows("SELECT current_database()").get(0);
            db.execute("CREATE SCHEMA shadow");
            db.execute("CREATE FUNCTION shadow.pg_current_snapshot() RETURNS pg_snapshot LANGUAGE plpgsql AS $$ BEGIN"
                    + " RAISE EXCEPTION 'not now' USING ERRCODE = '55000'; END $$");
            db.execute("ALTER DATABASE " + database + " SET search_path = shadow, pg_catalog, public");
            server.copyTo(directory.resolve("behind"));
            db.execute("ALTER DATABASE " + database + " RESET search_path"); // on the live server only

            try (EffectWorker worker = EffectWorker.startIfConfigured(config, 0, 1, PostgresSinkMetrics.unregistered())) {
                Eventually.await("the worker applied the effects on the live server", Duration.ofSeconds(30),
                        Duration.ofMillis(50), () -> db.queuedEffects() == 0);
                server.failOverTo(directory.resolve("behind"));
                Eventually.await("the copy is back", Duration.ofSeconds(30), Duration.ofMillis(100),
                        () -> db.queuedEffects() == 10);
                Thread.sleep(3000);
                assertThat(db.database.rows("SELECT count(*) FROM ledger.calls")).as("applied again on the copy")
                        .containsExactly("0");
            }
        }
    }

    /** A database on {@code server} whose effect function records each call in ledger.calls. */
    private static SinkDatabase recordingCalls(TestPostgres server) throws Exception {
        SinkDatabase db = new SinkDatabase(server.newDatabase());
        db.execute("CREATE SCHEMA ledger");
        db.execute("CREATE TABLE ledger.calls (seq bigserial PRIMARY KEY, id text NOT NULL)");
        db.execute("CREATE FUNCTION " + FUNCTION + "(message_id text, payload jsonb) RETURNS jsonb LANGUAGE plpgsql"
                + " AS $$ BEGIN INSERT INTO ledger.calls (id) VALUES (message_id);"
                + " RETURN jsonb_build_object('status', 'applied'); END $$");
        return db;
    }

    /** m0 to m9, offsets 0 to 9 of partition 0. */
    private static Event[] tenEvents() {
        Event[] events = new Event[10];
        for (int i = 0; i < events.length; i++) {
            events[i] = event("m" + i, 0, i);
        }
        return events;
    }

    private static long attempts(SinkDatabase db) throws Exception {
        return Long.parseLong(db.database.rows("SELECT last_value FROM ledger.attempts").get(0));
    }

    private static Event event(String id, int partition, long offset) {
        return new Event(id, "{}".getBytes(StandardCharsets.UTF_8), "payments", partition, offset, 0L, new HashMap<>());
    }
}
