package io.onceflow.sink.postgres.internal;

import io.onceflow.api.Event;
import java.util.Collections;
import java.util.List;
import org.apache.flink.annotation.Internal;

/**
 * Internal. What an exactly-once writer puts into each checkpoint: the transaction-id horizon of
 * that checkpoint, i.e. the server's next unassigned transaction id when the writer took its part
 * of the checkpoint ({@code pg_snapshot_xmax(pg_current_snapshot())}).
 *
 * <p>Why the horizon: every transaction that a completed checkpoint N may have to commit was
 * prepared by a writer that existed when N was triggered (Flink triggers only once every task runs,
 * and a restart aborts pending checkpoints), and every such writer took its epoch (an xid) in its
 * constructor, before that. So every committable of N has {@code epoch < horizon} for every
 * writer's horizon of N. A prepared transaction of this prefix with {@code epoch >= horizon} can
 * therefore not be in N's committables, whatever its checkpoint id: it was prepared by a writer
 * that started later, e.g. by another branch of the job started from an older savepoint, and
 * restoring N must roll it back (otherwise it is an orphan: never committed, never rolled back,
 * holding row locks forever).
 *
 * <p>The events: writers of earlier versions that deferred their claim wrote the events they held
 * into the transaction after their first barrier c and carried them in c's state, as c covers
 * their input. Such a checkpoint may still be restored: the restored writer writes them. Writers
 * now prepare held events in the barrier's own transaction and carry none.
 *
 * <p>Flink hands split list state out in contiguous chunks when the parallelism changes, so a new
 * subtask could get no element; each writer therefore snapshots its horizon as many times as it
 * takes for every possible new subtask to get one ({@code ceil(maxParallelism / parallelism)}).
 *
 * @param horizon the transaction-id horizon
 * @param deferredEvents events a deferred writer of an earlier version carried; none from this one
 */
@Internal
public record PostgresWriterState(long horizon, List<Event> deferredEvents) {

    public PostgresWriterState {
        deferredEvents = List.copyOf(deferredEvents);
    }

    /** A state without events. */
    public PostgresWriterState(long horizon) {
        this(horizon, List.of());
    }

    /** Copies per snapshot, so that any new parallelism up to {@code maxParallelism} gets one each. */
    public static int copiesPerSubtask(int parallelism, int maxParallelism) {
        return Math.max(1, (maxParallelism + parallelism - 1) / parallelism);
    }

    /** The copies of one snapshot, each with the horizon. */
    public static List<PostgresWriterState> copies(long horizon, int parallelism, int maxParallelism) {
        return Collections.nCopies(copiesPerSubtask(parallelism, maxParallelism),
                new PostgresWriterState(horizon));
    }
}
