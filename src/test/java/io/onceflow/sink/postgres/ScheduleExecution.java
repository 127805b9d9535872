package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.ProtocolHooks;
import io.onceflow.sink.postgres.internal.PostgresCommittable;
import io.onceflow.sink.postgres.internal.PostgresWriterState;
import io.onceflow.sink.postgres.internal.PostgresExactlyOnceWriter;
import io.onceflow.sink.postgres.internal.WriterStart;
import io.onceflow.testing.RecordingCommitRequest;
import io.onceflow.testing.RecordingCommitRequest.Outcome;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.OptionalLong;
import java.util.Random;
import java.util.concurrent.TimeoutException;

/**
 * One execution of the job in a {@link ProtocolSchedule}: its writer attempts (one per subtask),
 * the input position its source has read to, the checkpoint its writers have all taken and that
 * has not completed yet, and its committers' committables not committed yet (those of declined
 * checkpoints wait for the next completed one, as Flink's committer keeps them).
 */
final class ScheduleExecution {
    static final String JOB_ID = "schedule-job";

    /** A completed checkpoint: what a restore hands the writers and the committers. */
    record Completed(long id, long position, List<List<PostgresWriterState>> states, List<Pending> committer) {}

    /** A committable and the checkpoint whose barrier produced it. */
    record Pending(long checkpoint, PostgresCommittable committable) {}

    /** A checkpoint every writer of the execution has taken, not completed yet. */
    record Checkpoint(long id, long position, List<List<PostgresWriterState>> states) {}

    record ArmedFreeze(ProtocolHooks.Step step, int subtask) {}

    /** A commit's end: a committable the committer gave up on, or why the commit did not finish (null: it did). */
    record CommitResult(String failedOutcome, String interrupted) {}

    final PostgresSinkConfig config;
    final int parallelism;
    private final int attemptNumber;
    private final Completed restored;
    private final List<String> log;
    final List<Writer> writers = new ArrayList<>();
    long position;
    /**
     * Every writer has started: only then may Flink trigger a checkpoint of this execution (it
     * triggers none while a task is still INITIALIZING, which includes creating its writer).
     */
    boolean running;
    Checkpoint pending;
    final List<Pending> committer = new ArrayList<>();

    /** @param startPosition where the source starts without a restored checkpoint (the consumer group's offsets) */
    ScheduleExecution(PostgresSinkConfig config, int parallelism, int attemptNumber, String name, Completed restored,
            long startPosition, List<String> log) {
        this.config = config;
        this.parallelism = parallelism;
        this.attemptNumber = attemptNumber;
        this.restored = restored;
        this.log = log;
        this.position = restored == null ? startPosition : restored.position();
        if (restored != null) {
            committer.addAll(restored.committer());
        }
        for (int subtask = 0; subtask < parallelism; subtask++) {
            writers.add(new Writer(subtask, new ScheduledAttempt(name + "-subtask" + subtask)));
        }
    }

    static String id(long position) {
        return "e" + position;
    }

    int subtaskOf(long position) {
        return Math.floorMod(id(position).hashCode() * 31 + 7, parallelism);
    }

    /**
     * Starts the writers in subtask order; the restored committables are committed before the
     * writer {@code commitRestoredBefore} starts (after all of them if it is beyond the last).
     *
     * @return why the start failed, or null
     */
    String start(int commitRestoredBefore, ArmedFreeze freeze) throws TimeoutException {
        OptionalLong restoredId = restored == null ? OptionalLong.empty() : OptionalLong.of(restored.id());
        for (Writer writer : writers) {
            if (writer.subtask == commitRestoredBefore && restored != null) {
                String failed = commitRestored();
                if (failed != null) {
                    return failed;
                }
            }
            List<PostgresWriterState> state = restored == null ? List.of()
                    : stateFor(restored.states(), writer.subtask, parallelism);
            WriterStart start = new WriterStart(writer.subtask, parallelism, 128, attemptNumber, JOB_ID, restoredId, state);
            String failed = writer.run(() -> writer.writer = new PostgresExactlyOnceWriter(writer.attempt.sink(config), start,
                    PostgresSinkMetrics.unregistered()), freeze, "start");
            if (failed != null) {
                return failed;
            }
        }
        String failed = commitRestoredBefore >= parallelism && restored != null ? commitRestored() : null;
        running = failed == null;
        return failed;
    }

    private String commitRestored() throws TimeoutException {
        CommitResult result = commitUpTo(restored.id(), null);
        return result.failedOutcome() != null ? "LOST: " + result.failedOutcome() : result.interrupted();
    }

    /**
     * Flink's split list state after a restore: each subtask its own elements at an unchanged
     * parallelism, otherwise every element in contiguous chunks.
     */
    static List<PostgresWriterState> stateFor(List<List<PostgresWriterState>> bySubtask, int subtask, int parallelism) {
        if (bySubtask.size() == parallelism) {
            return bySubtask.get(subtask);
        }
        List<PostgresWriterState> all = bySubtask.stream().flatMap(List::stream).toList();
        int from = (int) ((long) all.size() * subtask / parallelism);
        int to = (int) ((long) all.size() * (subtask + 1) / parallelism);
        return all.subList(from, to);
    }

    /** The next {@code count} events of the input, each to the writer of its id's subtask; null if all went in. */
    String write(int count, ArmedFreeze freeze) throws TimeoutException {
        List<List<String>> bySubtask = new ArrayList<>();
        writers.forEach(w -> bySubtask.add(new ArrayList<>()));
        for (long p = position; p < position + count; p++) {
            bySubtask.get(subtaskOf(p)).add(id(p));
        }
        position += count;
        for (Writer writer : writers) {
            String[] ids = bySubtask.get(writer.subtask).toArray(String[]::new);
            String failed = writer.run(() -> PostgresTwoPhaseCommitTest.write(writer.writer, ids), freeze,
                    "write " + ids.length);
            if (failed != null) {
                return failed;
            }
        }
        return null;
    }

    /**
     * Barrier {@code id} at every writer, all at once as Flink's subtasks take it (a writer's first
     * barrier may wait for a row lock that another's recovery at the same barrier releases); null if
     * each prepared and snapshotted.
     */
    String barrier(long id, boolean endOfInput, ArmedFreeze freeze) throws TimeoutException {
        List<List<PostgresWriterState>> states = new ArrayList<>(Collections.nCopies(writers.size(), null));
        List<List<Pending>> committables = new ArrayList<>(Collections.nCopies(writers.size(), null));
        for (Writer writer : writers) {
            writer.submit(() -> {
                if (endOfInput) {
                    writer.writer.flush(true);
                }
                committables.set(writer.subtask, writer.writer.prepareCommit().stream()
                        .map(c -> new Pending(id, c)).toList());
                states.set(writer.subtask, writer.writer.snapshotState(id));
            }, freeze);
        }
        String failed = null;
        for (Writer writer : writers) {
            String outcome = writer.await("barrier " + id + (endOfInput ? " at the end of input" : ""));
            failed = failed == null ? outcome : failed;
        }
        if (failed != null) {
            return failed;
        }
        committables.forEach(committer::addAll);
        pending = new Checkpoint(id, position, states);
        return null;
    }

    Completed complete() {
        Completed completed = new Completed(pending.id(), pending.position(), pending.states(), List.copyOf(committer));
        pending = null;
        return completed;
    }

    /** Each subtask's committer commits its committables of checkpoints up to {@code checkpointId}. */
    CommitResult commitUpTo(long checkpointId, ArmedFreeze freeze) throws TimeoutException {
        for (Writer writer : writers) {
            List<Pending> mine = committer.stream().filter(p -> p.checkpoint() <= checkpointId
                    && p.committable().transactionId().subtaskIndex() % parallelism == writer.subtask).toList();
            if (mine.isEmpty()) {
                continue;
            }
            List<RecordingCommitRequest<PostgresCommittable>> requests = new ArrayList<>();
            String failed = writer.run(() -> requests.addAll(PostgresTwoPhaseCommitTest.commit(writer.attempt.sink(config),
                    mine.stream().map(Pending::committable).toArray(PostgresCommittable[]::new))), freeze, "commit");
            if (failed != null) {
                return new CommitResult(null, failed);
            }
            for (int i = 0; i < mine.size(); i++) {
                RecordingCommitRequest<PostgresCommittable> request = requests.get(i);
                if (request.outcome == Outcome.FAILED) {
                    return new CommitResult(request.getCommittable() + ": " + request.failure, null);
                }
                if (request.outcome == Outcome.RETRY_LATER) {
                    return new CommitResult(null, "asked to retry " + request.getCommittable());
                }
                committer.remove(mine.get(i));
            }
        }
        return new CommitResult(null, null);
    }

    /** One writer attempt of this execution; after a restart, perhaps a zombie. */
    final class Writer {
        final int subtask;
        final ScheduledAttempt attempt;
        volatile PostgresExactlyOnceWriter writer;
        private ZombieWork zombieWork;

        Writer(int subtask, ScheduledAttempt attempt) {
            this.subtask = subtask;
            this.attempt = attempt;
        }

        /** Runs {@code operation} on the attempt; null if it ended well, else how it did not. */
        String run(ScheduledAttempt.ThrowingRunnable operation, ArmedFreeze freeze, String what)
                throws TimeoutException {
            submit(operation, freeze);
            return await(what);
        }

        /** Hands {@code operation} to the attempt, armed with {@code freeze} if it is this subtask's. */
        void submit(ScheduledAttempt.ThrowingRunnable operation, ArmedFreeze freeze) {
            if (freeze != null && freeze.subtask() % parallelism == subtask) {
                attempt.freezeAt(freeze.step());
            }
            attempt.submit(operation);
        }

        /** Waits for the operation handed over; null if it ended well, else how it did not. */
        String await(String what) throws TimeoutException {
            ScheduledAttempt.Result result = attempt.await(ProtocolSchedule.OPERATION_TIMEOUT_MILLIS);
            return switch (result) {
                case DONE -> null;
                case FROZE -> attempt + " froze in " + what;
                case FAILED -> attempt + " failed in " + what + ": " + attempt.failure;
            };
        }

        /**
         * Stays alive, frozen, after its execution was given up, with work to do when it wakes (see
         * {@link ZombieWork}).
         */
        void becomeZombie(Random random, long inFlightBarrier, Completed latest) {
            if (!attempt.isFrozen()) {
                attempt.freezeNow();
            }
            zombieWork = ZombieWork.drawn(random, this, inFlightBarrier, latest);
        }

        List<String> zombieWork() {
            return zombieWork.descriptions();
        }

        /** Wakes the zombie: it finishes its operation, does its work while it can, and is cancelled. */
        String wakeAndWork() throws TimeoutException {
            String done = zombieWork.wake(this);
            cancel();
            return done;
        }

        /** Its execution (for {@link ZombieWork}). */
        ScheduleExecution execution() {
            return ScheduleExecution.this;
        }

        /** Flink cancels the attempt: its writer closes (its session with it). */
        void cancel() {
            attempt.stop();
            PostgresExactlyOnceWriter closing = writer;
            if (closing != null) {
                try {
                    closing.close();
                } catch (Exception e) {
                    // a fenced or broken session: nothing to close cleanly
                }
            }
        }

        @Override
        public String toString() {
            return attempt.toString();
        }
    }
}
