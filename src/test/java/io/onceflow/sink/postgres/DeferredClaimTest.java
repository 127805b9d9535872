package io.onceflow.sink.postgres;

import io.onceflow.api.Event;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.commit.PostgresCommittable;
import io.onceflow.sink.postgres.internal.commit.PostgresWriterState;
import io.onceflow.sink.postgres.internal.commit.PostgresWriterStateSerializer;
import io.onceflow.sink.postgres.internal.writer.PostgresExactlyOnceWriter;
import io.onceflow.sink.postgres.internal.writer.WriterStart;
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
 * Attempts of two JobManagers, against a real PostgreSQL server. Flink numbers attempts from 0 again
 * on a new JobManager, so when the old one restarted the job from checkpoint 1 several times and
 * died before checkpoint 2 completed, the new one's attempts restore checkpoint 1 with lower attempt
 * numbers than the recorded claim. They must neither be refused (a restart each) nor, as zombies of
 * the old JobManager woken late, act on the new one's transactions: an attempt that cannot be
 * ordered defers its claim to its first checkpoint barrier, whose id Flink's checkpoint counter
 * (kept across JobManagers) issues.
 */
class DeferredClaimTest {
    /** Checkpoint 1 completed under the old JobManager; it then restarted the job from it 5 times. */
    private static final OptionalLong RESTORED = OptionalLong.of(1);
    /** The new JobManager's first checkpoint: the old one triggered 2 and 3, which never completed. */
    private static final long FIRST_BARRIER = 4;

    private final SinkDatabase db = new SinkDatabase();
    private final PostgresSinkConfig config = db.config("job");

    private static WriterStart attempt(int attemptNumber, OptionalLong restored, List<PostgresWriterState> state) {
        return new WriterStart(0, 1, 128, attemptNumber, "test-job-id", restored, state);
    }

    /** Checkpoint 1 of a fresh writer, committed. */
    private void completeCheckpoint1() throws Exception {
        try (PostgresExactlyOnceWriter first = db.freshWriter(config)) {
            commit(config, checkpoint(first, 1, "a"));
        }
    }

    @Test
    void aNewJobManagersAttemptThatRestoredTheSameCheckpointDefersThenClaimsAtItsFirstBarrier() throws Exception {
        completeCheckpoint1();
        // the old JobManager's attempt 5 prepared checkpoint 2 (never completed) and has rows in its open transaction
        PostgresExactlyOnceWriter oldAttempt = SinkDatabase.writer(config, attempt(5, RESTORED, List.of()));
        PostgresCommittable orphan = checkpoint(oldAttempt, 2, "b");
        write(oldAttempt, "c");

        PostgresSinkMetrics metrics = PostgresSinkMetrics.unregistered();
        try (PostgresExactlyOnceWriter writer = new PostgresExactlyOnceWriter(config, attempt(0, RESTORED, List.of()),
                metrics)) {
            assertThat(metrics.deferredClaims.getCount()).isEqualTo(1);
            assertThat(db.prepared("job")).as("a deferred attempt rolls nothing back").containsExactly(
                    orphan.transactionId());
            write(writer, "b", "c");
            assertThat(writer.prepareCommit()).as("nothing to prepare before its first barrier").isEmpty();
            assertThat(db.deliveriesById()).containsOnlyKeys("a");

            writer.snapshotState(FIRST_BARRIER); // claims with 4: ends the old attempt, rolls back its orphan
            assertThat(metrics.olderAttemptsFenced.getCount()).isEqualTo(1);
            assertThat(metrics.transactionsRolledBackOnRecovery.getCount()).isEqualTo(1);
            assertThat(db.prepared("job")).isEmpty();
            assertThatThrownBy(oldAttempt::prepareCommit).isInstanceOf(IOException.class);

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
            write(writer, "b");
            assertThat(writer.prepareCommit()).isEmpty();
            writer.snapshotState(FIRST_BARRIER);
            PostgresCommittable completed = checkpoint(writer, FIRST_BARRIER + 1, "c"); // completes

            PostgresSinkMetrics zombieMetrics = PostgresSinkMetrics.unregistered();
            try (PostgresExactlyOnceWriter zombie = new PostgresExactlyOnceWriter(config, frozen, zombieMetrics)) {
                assertThat(zombieMetrics.deferredClaims.getCount()).isEqualTo(1);
                assertThat(zombieMetrics.olderAttemptsFenced.getCount()).isZero();
                assertThat(zombieMetrics.transactionsRolledBackOnRecovery.getCount()).isZero();
                assertThat(db.prepared("job")).containsExactly(completed.transactionId());
                write(zombie, "z");
                assertThat(zombie.prepareCommit()).isEmpty();
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

    /** A deferred writer that wrote {@code ids} before its first barrier, and the state it snapshots there. */
    private List<PostgresWriterState> deferredSnapshot(String... ids) throws Exception {
        completeCheckpoint1();
        SinkDatabase.writer(config, attempt(5, RESTORED, List.of())).close();
        try (PostgresExactlyOnceWriter writer = SinkDatabase.writer(config, attempt(0, RESTORED, List.of()))) {
            write(writer, ids);
            assertThat(writer.prepareCommit()).isEmpty();
            List<PostgresWriterState> states = writer.snapshotState(FIRST_BARRIER);
            write(writer, "late"); // into checkpoint 5's transaction; the task fails before it is prepared
            return roundTrip(states);
        }
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
    void eventsADeferredWriterReceivedBeforeItsBarrierAreWrittenOnceWhenItsCheckpointIsRestored() throws Exception {
        List<PostgresWriterState> atBarrier = deferredSnapshot("p", "q");
        assertThat(atBarrier).hasSize(128);
        assertThat(ids(atBarrier.subList(0, 1))).containsExactly("p", "q");
        assertThat(ids(atBarrier.subList(1, 128))).as("the other copies carry no events").isEmpty();

        // checkpoint 4 completed; a new JobManager restores it (attempts from 0 again): this attempt
        // defers too (4 is the recorded claim, and its attempt number is not higher)
        PostgresSinkMetrics metrics = PostgresSinkMetrics.unregistered();
        try (PostgresExactlyOnceWriter restored = new PostgresExactlyOnceWriter(config,
                attempt(0, OptionalLong.of(FIRST_BARRIER), atBarrier), metrics)) {
            assertThat(metrics.deferredClaims.getCount()).isEqualTo(1);
            write(restored, "late"); // replayed from the input: checkpoint 4's offsets are before it
            assertThat(restored.prepareCommit()).isEmpty();
            List<PostgresWriterState> next = restored.snapshotState(FIRST_BARRIER + 2);
            assertThat(ids(next)).containsExactly("p", "q", "late");
            commit(config, checkpoint(restored, FIRST_BARRIER + 3, "s"));
        }
        assertThat(db.prepared("job")).isEmpty();
        assertThat(db.deliveriesById())
                .containsExactlyInAnyOrderEntriesOf(Map.of("a", 1, "p", 1, "q", 1, "late", 1, "s", 1));
    }

    @Test
    void aRescaleOfADeferredWritersStateWritesItsEventsOnce() throws Exception {
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
        assertThat(db.deliveriesById()).isEmpty();
    }

    @Test
    void aBoundedInputThatEndsWhileDeferredClaimsByAttemptNumber() throws Exception {
        completeCheckpoint1();
        SinkDatabase.writer(config, attempt(5, RESTORED, List.of())).close();
        try (PostgresExactlyOnceWriter writer = SinkDatabase.writer(config, attempt(6, RESTORED, List.of()))) {
            commit(config, finalCheckpoint(writer, FIRST_BARRIER, "b")); // end of input, before any barrier
        }
        assertThat(db.deliveriesById()).containsExactlyInAnyOrderEntriesOf(Map.of("a", 1, "b", 1));
    }
}
