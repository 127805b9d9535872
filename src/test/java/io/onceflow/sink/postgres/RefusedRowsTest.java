package io.onceflow.sink.postgres;

import io.onceflow.api.Event;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.PostgresCommittable;
import io.onceflow.sink.postgres.internal.PostgresAtLeastOnceWriter;
import io.onceflow.sink.postgres.internal.PostgresExactlyOnceWriter;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Random;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import static io.onceflow.sink.postgres.PostgresTwoPhaseCommitTest.commit;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.entry;


/**
 * No input may stop the job: rows that PostgreSQL refuses for their data (a value the column type
 * cannot take, an id too large for the primary key's index, a user's CHECK constraint, a trigger's
 * exception) are isolated from their batch and recorded in the rejects table with their SQLSTATE,
 * in the same transaction as the rows that went in, and counted. Against a real server.
 */
class RefusedRowsTest {
    /** 250 good rows in batches of 100 (distinct ids); the refused ones are spread over the batches. */
    private static final int ROWS = 250;
    /** Incompressible, or PostgreSQL would compress it into the index. */
    private static final String LONG_ID = "long-" + new Random(42).ints(2900, 33, 127)
            .collect(StringBuilder::new, StringBuilder::appendCodePoint, StringBuilder::append);
    private static final Map<String, String> REFUSED = Map.of(
            "red", "23514", // CHECK constraint
            "overflow", "22003", // numeric overflow in the jsonb cast
            "forbidden", "P0001", // a trigger raises
            LONG_ID, "54000"); // index row too large for the primary key
    private static final Map<Integer, Event> REFUSED_AFTER = Map.of(
            5, event("red", "{\"color\":\"red\"}"),
            120, event("overflow", "{\"x\":1e999999}"),
            199, event("forbidden", "{\"kind\":\"forbidden\"}"),
            230, event(LONG_ID, "{}"));

    private final SinkDatabase db = new SinkDatabase();
    /** The trigger refuses rows by their own data and locks nothing shared: safe to accept. */
    private final PostgresSinkConfig config =
            SinkDatabase.config(db.builder("refusing").setAllowTriggersThatMayStallCheckpoints(true));

    @BeforeEach
    void addTheUsersRules() throws Exception {
        db.execute("ALTER TABLE onceflow_events ADD CONSTRAINT no_red CHECK (payload->>'color' IS DISTINCT FROM 'red')");
        db.execute("CREATE FUNCTION refuse_forbidden() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                + " IF NEW.payload->>'kind' = 'forbidden' THEN RAISE EXCEPTION 'kind % is forbidden', NEW.payload->>'kind';"
                + " END IF; RETURN NEW; END $$");
        db.execute("CREATE TRIGGER refuse_forbidden BEFORE INSERT ON onceflow_events FOR EACH ROW"
                + " EXECUTE FUNCTION refuse_forbidden()");
    }

    @Test
    void exactlyOnceIsolatesRefusedRowsInTheCheckpointsTransaction() throws Exception {
        PostgresSinkMetrics metrics = PostgresSinkMetrics.unregistered();
        try (PostgresExactlyOnceWriter writer = new PostgresExactlyOnceWriter(config,
                db.attempt(0, 1, OptionalLong.empty()), metrics)) {
            writeAll(writer);
            PostgresCommittable committable = writer.prepareCommit().iterator().next();
            writer.snapshotState(1);
            assertThat(db.rejects()).as("invisible until the checkpoint completes").isEmpty();
            commit(config, committable);
        }
        assertThat(db.rejects()).containsExactlyInAnyOrderEntriesOf(REFUSED);
        assertThat(db.deliveriesById()).hasSize(ROWS).doesNotContainKeys(REFUSED.keySet().toArray(String[]::new));
        assertThat(metrics.rowsRejected.getCount()).isEqualTo(REFUSED.size());
        assertThat(rejectErrors()).contains(
                entry("red", "new row for relation \"onceflow_events\" violates check constraint \"no_red\""
                        + " (constraint no_red)"),
                entry("forbidden", "kind forbidden is forbidden"));
    }

    @Test
    void atLeastOnceIsolatesRefusedRowsToo() throws Exception {
        PostgresSinkMetrics metrics = PostgresSinkMetrics.unregistered();
        try (PostgresAtLeastOnceWriter writer = new PostgresAtLeastOnceWriter(config, 0, 1, metrics)) {
            writeAll(writer);
            writer.flush(true);
        }
        assertThat(db.rejects()).containsExactlyInAnyOrderEntriesOf(REFUSED);
        assertThat(db.deliveriesById()).hasSize(ROWS);
        assertThat(metrics.rowsRejected.getCount()).isEqualTo(REFUSED.size());
    }

    @Test
    void aRefusedRowDeliveredAgainCountsItsDeliveriesInTheRejectsTable() throws Exception {
        try (PostgresAtLeastOnceWriter writer = new PostgresAtLeastOnceWriter(config, 0, 1,
                PostgresSinkMetrics.unregistered())) {
            writer.write(event("red-1", "{\"color\":\"red\"}"), null);
            writer.flush(false);
            writer.write(event("red-1", "{\"color\":\"red\"}"), null); // a replay
            writer.flush(true);
        }
        db.query("SELECT deliveries FROM onceflow_rejects WHERE id = 'red-1'",
                row -> assertThat(row.getInt(1)).isEqualTo(2));
    }

    private static void writeAll(SinkWriter<Event> writer) throws Exception {
        for (int i = 0; i < ROWS; i++) {
            writer.write(event("id-" + i, "{\"n\":" + i + "}"), null);
            if (REFUSED_AFTER.containsKey(i)) {
                writer.write(REFUSED_AFTER.get(i), null);
            }
        }
    }

    private static Event event(String id, String payload) {
        return new Event(id, payload.getBytes(StandardCharsets.UTF_8), "input", 0, 1, 0L, new HashMap<>());
    }

    private Map<String, String> rejectErrors() throws Exception {
        Map<String, String> errors = new HashMap<>();
        db.query("SELECT id, error FROM onceflow_rejects", row -> errors.put(row.getString(1), row.getString(2)));
        return errors;
    }

    @Test
    void aRowThatADeferredConstraintRefusesIsIsolatedInsteadOfFailingThePrepare() throws Exception {
        db.execute("CREATE TABLE customers (id text PRIMARY KEY)");
        db.execute("INSERT INTO customers VALUES ('known')");
        db.execute("ALTER TABLE onceflow_events ADD COLUMN customer text GENERATED ALWAYS AS (payload->>'customer')"
                + " STORED REFERENCES customers DEFERRABLE INITIALLY DEFERRED");
        try (PostgresExactlyOnceWriter writer = db.freshWriter(config)) {
            writer.write(event("good", "{\"customer\":\"known\"}"), null);
            writer.write(event("bad", "{\"customer\":\"unknown\"}"), null);
            PostgresCommittable committable = writer.prepareCommit().iterator().next();
            writer.snapshotState(1);
            commit(config, committable);
        }

        assertThat(db.deliveriesById()).containsOnlyKeys("good");
        assertThat(db.rejects()).containsExactly(entry("bad", "23503"));
    }
}
