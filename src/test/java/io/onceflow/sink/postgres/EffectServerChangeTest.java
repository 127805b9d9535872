package io.onceflow.sink.postgres;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.api.Event;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.effects.EffectWorker;
import io.onceflow.testing.Eventually;
import io.onceflow.testing.TestPostgres;
import java.nio.file.Path;
import java.time.Duration;
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
            SinkDatabase db = new SinkDatabase(server.newDatabase());
            db.execute("CREATE SCHEMA ledger");
            db.execute("CREATE TABLE ledger.calls (seq bigserial PRIMARY KEY, id text NOT NULL)");
            db.execute("CREATE FUNCTION " + FUNCTION + "(message_id text, payload jsonb) RETURNS jsonb LANGUAGE plpgsql"
                    + " AS $$ BEGIN INSERT INTO ledger.calls (id) VALUES (message_id);"
                    + " RETURN jsonb_build_object('status', 'applied'); END $$");
            PostgresSinkConfig config = db.config(db.builder("ledger").setEffectFunction(FUNCTION));
            Event[] events = new Event[10];
            for (int i = 0; i < events.length; i++) {
                events[i] = BusinessEffectsTest.event("m" + i, "{}");
            }
            db.commitFreshCheckpoint(config, events);
            server.copyTo(directory.resolve("behind"));

            try (EffectWorker worker = EffectWorker.startIfConfigured(config, 0, PostgresSinkMetrics.unregistered())) {
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
            // a restart, once an operator checked: the new worker applies what the copy has queued
            try (EffectWorker restarted = EffectWorker.startIfConfigured(config, 0, PostgresSinkMetrics.unregistered())) {
                Eventually.await("the restarted worker applies them", Duration.ofSeconds(30), Duration.ofMillis(50),
                        () -> db.queuedEffects() == 0);
            }
            assertThat(db.database.rows("SELECT count(*) FROM ledger.calls")).containsExactly("10");
        }
    }
}
