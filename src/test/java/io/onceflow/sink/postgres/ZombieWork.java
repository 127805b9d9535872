package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.internal.PostgresCommittable;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeoutException;

/**
 * What a zombie of a {@link ProtocolSchedule} does when it wakes, after the operation it froze in:
 * each perhaps, in this order, the input its source had read past its execution's position, a
 * barrier that was in flight (only if every writer of the execution had started: Flink triggers no
 * checkpoint while a task initialises), and the commit of the latest completed checkpoint, whose
 * notification reached it.
 */
final class ZombieWork {
    private final List<String> descriptions = new ArrayList<>();
    private final List<ScheduledAttempt.ThrowingRunnable> operations = new ArrayList<>();

    static ZombieWork drawn(Random random, ScheduleExecution.Writer zombie, long inFlightBarrier,
            ScheduleExecution.Completed latest) {
        ScheduleExecution execution = zombie.execution();
        ZombieWork work = new ZombieWork();
        if (random.nextBoolean()) {
            List<String> unread = new ArrayList<>();
            for (long p = execution.position; p < execution.position + 20; p++) {
                if (execution.subtaskOf(p) == zombie.subtask) {
                    unread.add(ScheduleExecution.id(p));
                }
            }
            work.add("write " + unread.size(),
                    () -> PostgresTwoPhaseCommitTest.write(zombie.writer, unread.toArray(String[]::new)));
        }
        if (execution.running && random.nextBoolean()) {
            work.add("barrier " + inFlightBarrier, () -> {
                zombie.writer.prepareCommit();
                zombie.writer.snapshotState(inFlightBarrier);
            });
        }
        if (latest != null && random.nextBoolean()) {
            List<PostgresCommittable> notified = execution.committer.stream()
                    .filter(p -> p.checkpoint() <= latest.id()
                            && p.committable().transactionId().subtaskIndex() % execution.parallelism == zombie.subtask)
                    .map(ScheduleExecution.Pending::committable).toList();
            if (!notified.isEmpty()) {
                work.add("commit of checkpoint " + latest.id() + " (" + notified.size() + ")",
                        () -> PostgresTwoPhaseCommitTest.commit(execution.config,
                                notified.toArray(PostgresCommittable[]::new)));
            }
        }
        return work;
    }

    private void add(String description, ScheduledAttempt.ThrowingRunnable operation) {
        descriptions.add(description);
        operations.add(operation);
    }

    List<String> descriptions() {
        return descriptions;
    }

    /** Wakes {@code zombie}, waits for the operation it froze in, then does the work until a step fails. */
    String wake(ScheduleExecution.Writer zombie) throws TimeoutException {
        List<String> done = new ArrayList<>();
        ScheduledAttempt attempt = zombie.attempt;
        ScheduledAttempt.Result result = attempt.wake(ProtocolSchedule.OPERATION_TIMEOUT_MILLIS);
        done.add("its operation " + result + (attempt.failure == null ? "" : " (" + attempt.failure + ")"));
        for (int i = 0; i < operations.size() && result != ScheduledAttempt.Result.FAILED && zombie.writer != null; i++) {
            result = attempt.run(operations.get(i), ProtocolSchedule.OPERATION_TIMEOUT_MILLIS);
            done.add(descriptions.get(i) + " " + result + (attempt.failure == null ? "" : " (" + attempt.failure + ")"));
        }
        return String.join("; ", done);
    }
}
