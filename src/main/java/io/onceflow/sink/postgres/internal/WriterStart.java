package io.onceflow.sink.postgres.internal;

import io.onceflow.api.Event;
import java.util.List;
import java.util.OptionalLong;
import org.apache.flink.annotation.Internal;
import org.apache.flink.api.connector.sink2.InitContext;

/**
 * Internal. What one attempt of one writer subtask knows about itself when it starts: who it is in
 * Flink's terms (subtask, parallelism, attempt, job) and what it restored.
 *
 * @param restoredCheckpointId the checkpoint or savepoint the job restored from; empty on a fresh
 *     start
 * @param restoredState the writer states handed to this subtask by Flink (any number of elements,
 *     also none, after rescaling)
 */
@Internal
public record WriterStart(
        int subtaskIndex,
        int parallelism,
        int maxParallelism,
        int attemptNumber,
        String jobId,
        OptionalLong restoredCheckpointId,
        List<PostgresWriterState> restoredState) {

    public static WriterStart of(InitContext context, List<PostgresWriterState> restoredState) {
        return new WriterStart(
                context.getTaskInfo().getIndexOfThisSubtask(),
                context.getTaskInfo().getNumberOfParallelSubtasks(),
                context.getTaskInfo().getMaxNumberOfParallelSubtasks(),
                context.getTaskInfo().getAttemptNumber(),
                context.getJobInfo().getJobId().toHexString(),
                context.getRestoredCheckpointId(),
                List.copyOf(restoredState));
    }

    /**
     * The events that a writer of an earlier version held for a deferred claim and put into the
     * restored checkpoint (see {@link PostgresWriterState}): this subtask writes them.
     */
    public List<Event> restoredDeferredEvents() {
        return restoredState.stream().flatMap(state -> state.deferredEvents().stream()).toList();
    }

    /** This attempt's fencing token for a claim at barrier {@code checkpointId} (see {@link ClaimToken}). */
    public ClaimToken tokenAt(long run, long checkpointId) {
        return new ClaimToken(run, checkpointId, subtaskIndex, attemptNumber);
    }

    /** Whether {@code subtask} of an earlier parallelism is this subtask's to recover. */
    public boolean covers(int subtask) {
        return subtask % parallelism == subtaskIndex;
    }

    /**
     * The lowest restored horizon, if any element was restored: every horizon is a valid bound
     * (see {@link PostgresWriterState}), the lowest rolls back the most orphans.
     */
    public OptionalLong restoredHorizon() {
        return restoredState.isEmpty()
                ? OptionalLong.empty()
                : OptionalLong.of(restoredState.stream().mapToLong(PostgresWriterState::horizon).min().getAsLong());
    }
}
