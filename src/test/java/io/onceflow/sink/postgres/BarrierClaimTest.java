package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.options.PostgresTableOptions;
import io.onceflow.api.Event;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.PostgresCommittable;
import io.onceflow.sink.postgres.internal.PostgresWriterState;
import io.onceflow.sink.postgres.internal.PostgresWriterStateSerializer;
import io.onceflow.sink.postgres.internal.PostgresExactlyOnceWriter;
import io.onceflow.sink.postgres.internal.WriterStart;
import io.onceflow.testing.RecordingCommitRequest.Outcome;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import org.junit.jupiter.api.Test;
import static io.onceflow.sink.postgres.PostgresTwoPhaseCommitTest.checkpoint;
import static io.onceflow.sink.postgres.PostgresTwoPhaseCommitTest.commit;
import static io.onceflow.sink.postgres.PostgresTwoPhaseCommitTest.finalCheckpoint;
import static io.onceflow.sink.postgres.PostgresTwoPhaseCommitTest.write;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Claims at the first checkpoint barrier, against a real PostgreSQL server, with attempts of two
 * JobManagers. Flink numbers attempts from 0 again on a new JobManager, so when the old one
 * restarted the job from checkpoint 1 several times and died before checkpoint 2 completed, the new
 * one's attempts restore checkpoint 1 with lower attempt numbers than the old ones'. They must
 * neither be refused (a restart each) nor, as zombies of the old JobManager woken late, act on the
 * new one's transactions: every attempt touches nothing until its first barrier, and claims with
 * that barrier's id, which Flink's checkpoint counter (kept across JobManagers) issues.
 */
class BarrierClaimTest {
    /** Checkpoint 1 completed under the old JobManager; it then restarted the job from it 5 times. */
    private static final OptionalLong RESTORED = OptionalLong.of(1);
    /** The new JobManager's first checkpoint: the old one triggered 2 and 3, which never completed. */
    private static final long FIRST_BARRIER = 4;

    private final SinkDatabase db = new SinkDatabase();
    private final PostgresSinkConfig config = db.config("job");

    private static WriterStart attempt(int attemptNumber, OptionalLong restored, List<PostgresWriterState> state) {
        return new WriterStart(0, 1, 128, attemptNumber, "test-job-id", restored, state);
    }

    /**
     * The claim's state machine: an attempt holds until its barrier; one whose barrier is older than
     * a claim already made is FENCED there, touches nothing, and takes no more events.
     */
    @Test
    void anAttemptWhoseBarrierIsOlderThanTheClaimIsFencedThereAndTakesNoMoreEvents() throws Exception {
        completeCheckpoint1();
        PostgresSinkMetrics metrics = PostgresSinkMetrics.unregistered();
        try (PostgresExactlyOnceWriter zombie = new PostgresExactlyOnceWriter(config, attempt(3, RESTORED, List.of()),
                        metrics);
                PostgresExactlyOnceWriter live = SinkDatabase.writer(config, attempt(0, RESTORED, List.of()))) {
            write(zombie, "z");
            assertThat(zombie.claimState()).isEqualTo("HOLDING");
            write(live, "b");
            live.prepareCommit();
            live.snapshotState(FIRST_BARRIER);

            zombie.prepareCommit();
            assertThatThrownBy(() -> zombie.snapshotState(FIRST_BARRIER - 1)).isInstanceOf(IOException.class)
                    .hasStackTraceContaining("StaleWriterException");
            assertThat(zombie.claimState()).isEqualTo("FENCED");
            assertThat(metrics.staleWriterAttemptsRefused.getCount()).isEqualTo(1);
            assertThatThrownBy(() -> write(zombie, "y")).hasMessageContaining("cannot hold an event in state FENCED");
            assertThat(db.deliveriesById()).doesNotContainKeys("z", "y");
        }
    }

    /** Checkpoint 1 of a fresh writer, committed. */
    private void completeCheckpoint1() throws Exception {
        try (PostgresExactlyOnceWriter first = db.freshWriter(config)) {
            commit(config, checkpoint(first, 1, "a"));
        }
    }

    @Test
    void aNewJobManagersAttemptTouchesNothingBeforeItsFirstBarrierThenClaimsAndPreparesItsHeldEventsThere()
            throws Exception {
        completeCheckpoint1();
        // the old JobManager's attempt 5 prepared checkpoint 2 (never completed) and has rows in its open transaction
        PostgresExactlyOnceWriter oldAttempt = SinkDatabase.writer(config, attempt(5, RESTORED, List.of()));
        PostgresCommittable orphan = checkpoint(oldAttempt, 2, "b");
        write(oldAttempt, "c");

        PostgresSinkMetrics metrics = PostgresSinkMetrics.unregistered();
        try (PostgresExactlyOnceWriter writer = new PostgresExactlyOnceWriter(config, attempt(0, RESTORED, List.of()),
                metrics)) {
            assertThat(db.prepared("job")).as("an attempt rolls nothing back before its barrier").containsExactly(
                    orphan.transactionId());
            write(writer, "b", "c");
            assertThat(writer.claimState()).isEqualTo("HOLDING");
            List<PostgresCommittable> named = List.copyOf(writer.prepareCommit());
            assertThat(named).as("named for the committer, prepared at the barrier").hasSize(1);
            assertThat(db.prepared("job")).containsExactly(orphan.transactionId());
            assertThat(metrics.olderAttemptsFenced.getCount()).isZero();

            writer.snapshotState(FIRST_BARRIER); // claims with 4: ends the old attempt, rolls back its orphan
            assertThat(writer.claimState()).isEqualTo("CLAIMED");
            assertThat(metrics.olderAttemptsFenced.getCount()).isEqualTo(1);
            assertThat(metrics.transactionsRolledBackOnRecovery.getCount()).isEqualTo(1);
            assertThat(db.prepared("job")).as("the held events, prepared under the name handed out")
                    .containsExactly(named.get(0).transactionId());
            assertThatThrownBy(oldAttempt::prepareCommit).isInstanceOf(IOException.class);
            assertThat(oldAttempt.claimState()).as("its session was ended: its prepare failed").isEqualTo("FAILED");
            assertThat(commit(config, named.get(0))).extracting(r -> r.outcome).containsExactly(Outcome.COMMITTED);

            PostgresCommittable next = checkpoint(writer, FIRST_BARRIER + 1, "d");
            assertThat(next.transactionId().checkpointId()).isEqualTo(FIRST_BARRIER + 1);
            assertThat(db.prepared("job")).containsExactly(next.transactionId());
            assertThat(commit(config, next)).extracting(r -> r.outcome).containsExactly(Outcome.COMMITTED);
        } finally {
            oldAttempt.close();
        }
        assertThat(db.prepared("job")).isEmpty();
        assertThat(db.deliveriesById()).containsExactlyInAnyOrderEntriesOf(Map.of("a", 1, "b", 1, "c", 1, "d", 1));
    }

    @Test
    void aFrozenAttemptOfTheOldJobManagerWokenAfterTheNewOneClaimedRollsNothingBackAndEndsNobody() throws Exception {
        completeCheckpoint1();
        SinkDatabase.writer(config, attempt(6, RESTORED, List.of())).close(); // claimed with checkpoint 1
        // attempt 7 is deployed, and its TaskManager freezes before its first statement; the JobManager dies
        WriterStart frozen = attempt(7, RESTORED, List.of());

        try (PostgresExactlyOnceWriter writer = SinkDatabase.writer(config, attempt(0, RESTORED, List.of()))) {
            PostgresCommittable first = checkpoint(writer, FIRST_BARRIER, "b");
            PostgresCommittable completed = checkpoint(writer, FIRST_BARRIER + 1, "c"); // completes
            commit(config, first);

            PostgresSinkMetrics zombieMetrics = PostgresSinkMetrics.unregistered();
            try (PostgresExactlyOnceWriter zombie = new PostgresExactlyOnceWriter(config, frozen, zombieMetrics)) {
                assertThat(zombieMetrics.olderAttemptsFenced.getCount()).isZero();
                assertThat(zombieMetrics.transactionsRolledBackOnRecovery.getCount()).isZero();
                assertThat(db.prepared("job")).containsExactly(completed.transactionId());
                write(zombie, "z");
                assertThat(zombie.prepareCommit()).hasSize(1);
                // frozen inside the old JobManager's barrier 3, it finds the claim of the later barrier 4
                assertThatThrownBy(() -> zombie.snapshotState(3))
                        .isInstanceOf(IOException.class)
                        .hasMessageContaining("is claimed by a newer attempt");
            }
            assertThat(db.prepared("job")).containsExactly(completed.transactionId());
            assertThat(commit(config, completed)).extracting(r -> r.outcome).containsExactly(Outcome.COMMITTED);
            // the new attempt's session was not ended: it goes on preparing
            commit(config, checkpoint(writer, FIRST_BARRIER + 2, "d"));
        }
        assertThat(db.prepared("job")).isEmpty();
        assertThat(db.deliveriesById()).containsExactlyInAnyOrderEntriesOf(Map.of("a", 1, "b", 1, "c", 1, "d", 1));
    }

    @Test
    void aWriterCarriesNoEventsInItsState() throws Exception {
        try (PostgresExactlyOnceWriter writer = db.freshWriter(config)) {
            write(writer, "a");
            writer.prepareCommit();
            assertThat(ids(writer.snapshotState(1))).isEmpty();
        }
    }

    /**
     * The state a writer of an earlier version snapshotted at the barrier where it claimed after
     * deferring: the events it held, in the first copy.
     */
    private List<PostgresWriterState> deferredSnapshot(String... ids) throws Exception {
        completeCheckpoint1();
        List<Event> events = java.util.Arrays.stream(ids).map(SinkDatabase::event).toList();
        List<PostgresWriterState> states = new ArrayList<>();
        states.add(new PostgresWriterState(1, events));
        states.addAll(PostgresWriterState.copies(1, 1, 128).subList(1, 128));
        return roundTrip(states);
    }

    private static List<PostgresWriterState> roundTrip(List<PostgresWriterState> states) throws IOException {
        PostgresWriterStateSerializer serializer = new PostgresWriterStateSerializer();
        List<PostgresWriterState> read = new ArrayList<>();
        for (PostgresWriterState state : states) {
            read.add(serializer.deserialize(serializer.getVersion(), serializer.serialize(state)));
        }
        return read;
    }

    private static List<String> ids(List<PostgresWriterState> states) {
        return states.stream().flatMap(state -> state.deferredEvents().stream()).map(event -> event.messageId).toList();
    }

    @Test
    void eventsAnEarlierVersionCarriedInItsStateAreWrittenOnceWhenItsCheckpointIsRestored() throws Exception {
        List<PostgresWriterState> atBarrier = deferredSnapshot("p", "q");
        try (PostgresExactlyOnceWriter restored = SinkDatabase.writer(config,
                attempt(0, OptionalLong.of(FIRST_BARRIER), atBarrier))) {
            PostgresCommittable first = checkpoint(restored, FIRST_BARRIER + 2, SinkDatabase.event("late"));
            assertThat(first.transactionId().checkpointId()).isEqualTo(FIRST_BARRIER + 1);
            commit(config, first);
            commit(config, checkpoint(restored, FIRST_BARRIER + 3, "s"));
        }
        assertThat(db.prepared("job")).isEmpty();
        assertThat(db.deliveriesById())
                .containsExactlyInAnyOrderEntriesOf(Map.of("a", 1, "p", 1, "q", 1, "late", 1, "s", 1));
    }

    @Test
    void aRescaleOfAnEarlierVersionsCarriedEventsWritesThemOnce() throws Exception {
        List<PostgresWriterState> atBarrier = deferredSnapshot("p", "q");
        // resubmitted from checkpoint 4 with parallelism 2: Flink hands each new subtask a contiguous half
        PostgresSinkConfig rescaled = SinkDatabase.newRun(config);
        List<PostgresCommittable> committables = new ArrayList<>();
        for (int subtask = 0; subtask < 2; subtask++) {
            List<PostgresWriterState> half = atBarrier.subList(subtask * 64, subtask * 64 + 64);
            WriterStart start = new WriterStart(subtask, 2, 128, 0, "test-job-id", OptionalLong.of(FIRST_BARRIER),
                    half);
            try (PostgresExactlyOnceWriter writer = SinkDatabase.writer(rescaled, start)) {
                Event replayed = SinkDatabase.event("late-" + subtask);
                committables.add(checkpoint(writer, FIRST_BARRIER + 1, replayed));
            }
        }
        assertThat(committables.get(0).transactionId().subtaskIndex()).isZero();
        commit(rescaled, committables.toArray(PostgresCommittable[]::new));
        assertThat(db.prepared("job")).isEmpty();
        assertThat(db.deliveriesById())
                .containsExactlyInAnyOrderEntriesOf(Map.of("a", 1, "p", 1, "q", 1, "late-0", 1, "late-1", 1));
    }

    @Test
    void aWriterWhoseClaimWasTakenOverCannotPrepareEvenIfItsSessionLives() throws Exception {
        try (PostgresExactlyOnceWriter writer = db.freshWriter(config)) {
            commit(config, checkpoint(writer, 1, "w"));
            write(writer, "x");
            // a newer attempt's claim, recorded by a role that could not end this writer's session
            db.execute("UPDATE " + PostgresTableOptions.DEFAULT_WRITERS + " SET attempt = attempt + 1,"
                    + " epoch = epoch + 1 WHERE sink_prefix = 'job' AND subtask_index = 0");

            assertThatThrownBy(writer::prepareCommit)
                    .isInstanceOf(IOException.class)
                    .hasMessageContaining("could not prepare")
                    .hasMessageContaining("is no longer claimed by this writer")
                    .hasMessageContaining("zombie");
            assertThat(db.prepared("job")).isEmpty();
        }
        assertThat(db.deliveriesById()).containsOnlyKeys("w");
    }

    @Test
    void aBoundedInputThatEndsBeforeAnyBarrierClaimsAndPreparesAtTheFinalCheckpoint() throws Exception {
        completeCheckpoint1();
        // the old JobManager's attempt 5 claimed at barrier 3, then the new JobManager restored 1
        PostgresExactlyOnceWriter old = SinkDatabase.writer(config, attempt(5, RESTORED, List.of()));
        old.prepareCommit();
        old.snapshotState(3);
        try (PostgresExactlyOnceWriter writer = SinkDatabase.writer(config, attempt(0, RESTORED, List.of()))) {
            PostgresCommittable last = finalCheckpoint(writer, FIRST_BARRIER, "b"); // end of input, then barrier 4
            assertThat(db.prepared("job")).containsExactly(last.transactionId());
            commit(config, last);
        } finally {
            old.close();
        }
        assertThat(db.deliveriesById()).containsExactlyInAnyOrderEntriesOf(Map.of("a", 1, "b", 1));
    }
    /**
     * A first interval longer than the memory limit (a backlog after a restart): the events beyond it
     * wait in a spill file, and all of them are prepared at the barrier, each once.
     */
    @Test
    void eventsBeyondTheMemoryLimitAreSpilledThenPreparedAtTheBarrierEachOnce() throws Exception {
        PostgresSinkConfig small = db.config(db.builder("job").setHeldEventsMemoryBytes(2_000));
        String[] ids = java.util.stream.IntStream.range(0, 3_000).mapToObj(i -> "e" + i).toArray(String[]::new);
        PostgresSinkMetrics metrics = PostgresSinkMetrics.unregistered();
        PostgresCommittable committable;
        try (PostgresExactlyOnceWriter writer = new PostgresExactlyOnceWriter(small, attempt(0, OptionalLong.empty(),
                List.of()), metrics)) {
            write(writer, ids);
            assertThat(metrics.eventsSpilledBeforeBarrier.getCount()).isGreaterThan(2_980);
            committable = checkpoint(writer, 1, new String[0]);
        }
        commit(small, committable);
        Map<String, Integer> deliveries = db.deliveriesById();
        assertThat(deliveries).hasSize(3_000).containsEntry("e0", 1).containsEntry("e2999", 1);
        assertThat(deliveries.values()).containsOnly(1);
    }

    /** An attempt that dies before its barrier leaves nothing: its held events are replayed. */
    @Test
    void anAttemptClosedBeforeItsBarrierLeavesNothingOfItsSpilledEvents() throws Exception {
        PostgresSinkConfig small = db.config(db.builder("job").setHeldEventsMemoryBytes(0));
        try (PostgresExactlyOnceWriter writer = SinkDatabase.writer(small, attempt(0, OptionalLong.empty(),
                List.of()))) {
            write(writer, "a", "b");
        }
        assertThat(db.deliveriesById()).isEmpty();
        try (PostgresExactlyOnceWriter writer = SinkDatabase.writer(small, attempt(1, OptionalLong.empty(),
                List.of()))) {
            commit(small, checkpoint(writer, 1, "a", "b"));
        }
        assertThat(db.deliveriesById()).containsExactlyInAnyOrderEntriesOf(Map.of("a", 1, "b", 1));
    }
    /**
     * A checkpoint of an earlier version carries deferred events, and the restored writer cannot
     * spill them (its temporary directory is unusable, the disk is full): its start fails before it
     * opens anything, so no session of it lingers to be taken for a live job's (a new submission of
     * the prefix would be refused while one did).
     */
    @Test
    void aWriterThatCannotSpillItsRestoredEventsFailsToStartAndLeavesNoSession(@org.junit.jupiter.api.io.TempDir
            java.nio.file.Path directory) throws Exception {
        PostgresSinkConfig legacy = db.config(db.builder("legacy").setHeldEventsMemoryBytes(0));
        java.nio.file.Path notADirectory = java.nio.file.Files.writeString(directory.resolve("tmp-is-a-file"), "");
        PostgresWriterState withEvents = new PostgresWriterState(1, List.of(SinkDatabase.event("a")));
        String tmp = System.getProperty("java.io.tmpdir");
        System.setProperty("java.io.tmpdir", notADirectory.toString());
        try {
            assertThatThrownBy(() -> SinkDatabase.writer(legacy, attempt(0, RESTORED, List.of(withEvents))))
                    .isInstanceOf(IOException.class);
        } finally {
            System.setProperty("java.io.tmpdir", tmp);
        }
        assertThat(db.database.rows("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE"
                + " 'onceflow-legacy-writer%'")).containsExactly("0");
        SinkDatabase.newRun(legacy); // not refused as another live job
    }
}
