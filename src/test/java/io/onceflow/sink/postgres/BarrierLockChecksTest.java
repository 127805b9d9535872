package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.options.StartMode;
import io.onceflow.sink.postgres.options.PostgresTableOptions;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresCommittable;
import io.onceflow.sink.postgres.internal.PostgresExactlyOnceWriter;
import java.io.IOException;
import java.sql.SQLException;
import java.util.Map;
import java.util.OptionalLong;
import org.junit.jupiter.api.Test;
import static io.onceflow.sink.postgres.PostgresTwoPhaseCommitTest.checkpoint;
import static io.onceflow.sink.postgres.PostgresTwoPhaseCommitTest.commit;
import static io.onceflow.sink.postgres.PostgresTwoPhaseCommitTest.write;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * A prepared transaction must not lock rows other subtasks need before their barrier: unique
 * indexes and triggers on the sink's tables, against a real PostgreSQL server, refused by
 * {@code main}'s start of a run and by every writer's start (they may be added while the job runs),
 * and the stall a shared-counter trigger causes when the user opts in anyway.
 */
class BarrierLockChecksTest {
    private static final String TABLE = SinkDatabase.TABLE;
    private static final String COUNTER_TRIGGER = "CREATE TABLE event_count (n bigint NOT NULL);"
            + " INSERT INTO event_count VALUES (0);"
            + " CREATE FUNCTION count_event() RETURNS trigger LANGUAGE plpgsql AS"
            + " $$ BEGIN UPDATE event_count SET n = n + 1; RETURN NEW; END $$;"
            + " CREATE TRIGGER count_events AFTER INSERT ON " + TABLE + " FOR EACH ROW EXECUTE FUNCTION count_event()";

    private final SinkDatabase db = new SinkDatabase();

    /** A new run of {@code builder}'s sink with {@code parallelism}, as {@code main} registers it. */
    private static PostgresSinkConfig run(PostgresSinkBuilder builder, int parallelism) throws SQLException {
        return new PostgresRunRegistry(builder.build().config())
                .startRun(parallelism, StartMode.FRESH_DISCARDING_PENDING, "test job").config();
    }

    private PostgresExactlyOnceWriter writer(PostgresSinkConfig config, int subtask, int parallelism)
            throws IOException {
        return SinkDatabase.writer(config, db.attempt(subtask, parallelism, OptionalLong.empty()));
    }

    @Test
    void aUniqueIndexAddedAfterTheRunStartedStopsTheNextWriterStart() throws Exception {
        PostgresSinkConfig config = run(db.builder("job"), 2);
        db.execute("CREATE UNIQUE INDEX events_by_order ON " + TABLE + " ((payload->>'order'))");

        assertThatThrownBy(() -> writer(config, 1, 2))
                .isInstanceOf(IOException.class)
                .hasMessageContaining("events_by_order")
                .hasMessageContaining("besides its primary key")
                .hasMessageContaining("parallelism 1");
        assertThatThrownBy(() -> run(db.builder("job"), 2))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("events_by_order");
    }

    @Test
    void aTriggerOnTheEventsTableIsRefusedByTheRunStartAndByEveryWriterStart() throws Exception {
        PostgresSinkConfig config = run(db.builder("job"), 1);
        db.execute("CREATE TABLE audit (id text PRIMARY KEY);"
                + " CREATE FUNCTION audit_event() RETURNS trigger LANGUAGE plpgsql AS"
                + " $$ BEGIN INSERT INTO audit VALUES (NEW.id) ON CONFLICT DO NOTHING; RETURN NEW; END $$;"
                + " CREATE TRIGGER audit_events AFTER INSERT ON " + TABLE + " FOR EACH ROW EXECUTE FUNCTION audit_event()");

        // added while the job ran: its next restart refuses instead of waiting for ever
        assertThatThrownBy(() -> writer(config, 0, 1))
                .isInstanceOf(IOException.class)
                .hasMessageContaining(TABLE + ": audit_events -> audit_event")
                .hasMessageContaining("PostgreSQL's deadlock detector cannot see")
                .hasMessageContaining("postgres.effect.function")
                .hasMessageContaining("postgres.allow.triggers.that.may.stall.checkpoints=true");
        assertThatThrownBy(() -> run(db.builder("job"), 1))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("audit_events");

        // an audit row per id locks only its own id's row: the user may accept it
        PostgresSinkConfig accepted = run(db.builder("job").setAllowTriggersThatMayStallCheckpoints(true), 1);
        try (PostgresExactlyOnceWriter writer = writer(accepted, 0, 1)) {
            commit(accepted, checkpoint(writer, 1, "a", "b"));
        }
        assertThat(db.deliveriesById()).containsOnlyKeys("a", "b");
        long[] audited = {0};
        db.query("SELECT count(*) FROM audit", row -> audited[0] = row.getLong(1));
        assertThat(audited[0]).isEqualTo(2);

        db.execute("ALTER TABLE " + TABLE + " DISABLE TRIGGER audit_events");
        writer(run(db.builder("job"), 1), 0, 1).close(); // a disabled trigger takes no lock
    }

    @Test
    void aTriggerOnTheRejectsTableIsRefusedToo() throws Exception {
        PostgresSinkConfig config = run(db.builder("job"), 1);
        db.execute("CREATE FUNCTION noop() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;"
                + " CREATE TRIGGER on_reject BEFORE INSERT ON " + PostgresTableOptions.DEFAULT_REJECTS
                + " FOR EACH ROW EXECUTE FUNCTION noop()");

        assertThatThrownBy(() -> writer(config, 0, 1))
                .isInstanceOf(IOException.class)
                .hasMessageContaining(PostgresTableOptions.DEFAULT_REJECTS + ": on_reject -> noop");
    }

    /**
     * Why the rule: with a shared counter, subtask 0's prepared transaction holds the counter's row
     * until checkpoint 1 completes; subtask 1 needs it to write its rows before its barrier, so it
     * can never pass its barrier, and the checkpoint can never complete. The writer's lock timeout
     * turns the wait into a failure, and a restart would replay into the same wait.
     */
    @Test
    void aSharedCounterTriggerStallsTheCheckpointWhenTheUserOptsIn() throws Exception {
        run(db.builder("job"), 2);
        db.execute(COUNTER_TRIGGER);
        PostgresSinkConfig config = run(db.builder("job").setAllowTriggersThatMayStallCheckpoints(true), 2);

        try (PostgresExactlyOnceWriter first = writer(config, 0, 2);
                PostgresExactlyOnceWriter second = writer(config, 1, 2)) {
            PostgresCommittable prepared = checkpoint(first, 1, "a"); // at its barrier: holds the counter

            write(second, "b"); // before its barrier
            second.prepareCommit();
            assertThatThrownBy(() -> second.snapshotState(1))
                    .isInstanceOf(IOException.class)
                    .rootCause().hasMessageContaining("lock timeout");

            assertThat(db.prepared("job")).as("subtask 0's transaction waits for a checkpoint that cannot complete")
                    .containsExactly(prepared.transactionId());
            commit(config, prepared); // only to leave nothing prepared behind
        }
        assertThat(db.deliveriesById()).isEqualTo(Map.of("a", 1));
    }

    /** The same two subtasks without the trigger: the checkpoint completes. */
    @Test
    void withoutTheTriggerBothSubtasksPassTheirBarrier() throws Exception {
        PostgresSinkConfig config = run(db.builder("job"), 2);

        try (PostgresExactlyOnceWriter first = writer(config, 0, 2);
                PostgresExactlyOnceWriter second = writer(config, 1, 2)) {
            PostgresCommittable a = checkpoint(first, 1, "a");
            PostgresCommittable b = checkpoint(second, 1, "b");
            commit(config, a, b);
        }
        assertThat(db.deliveriesById()).isEqualTo(Map.of("a", 1, "b", 1));
    }
}
