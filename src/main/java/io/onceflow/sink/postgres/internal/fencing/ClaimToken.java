package io.onceflow.sink.postgres.internal.fencing;

import io.onceflow.sink.postgres.PostgresRunRegistry;
import org.apache.flink.annotation.Internal;

/**
 * Internal. The fencing token of one writer attempt, and the rule that orders two attempts that
 * claim the same subtask index of a sink prefix (see {@link WriterFence}).
 *
 * <p>The order must be Flink's order of attempts, not the order in which they reach the database:
 * an attempt that stalls (GC pause, frozen VM, SIGSTOP) before its first statement reaches the
 * database after its successor did. So the token is made of what Flink decided before the attempt
 * ran, compared in this order:
 *
 * <ol>
 *   <li>{@code run}: issued by the database when the job was submitted ({@link SinkRuns}), so a
 *       later submission (an upgrade from a savepoint, a rollback to an older one) is newer than
 *       every attempt of an earlier one, whatever checkpoint it restored;
 *   <li>{@code restoredCheckpoint}: within a run, Flink restores the latest completed checkpoint,
 *       which never goes back;
 *   <li>{@code attempt}, for the same execution vertex ({@code claimer}): Flink numbers the attempts
 *       of one subtask in order within a run.
 * </ol>
 *
 * <p>Two tokens of one run with the same restored checkpoint but different claimers (only after an
 * in-job rescale by Flink's adaptive scheduler, when an index of the old parallelism is recovered by
 * another subtask) cannot be ordered: {@link Verdict#UNDECIDED}, and the fence falls back to the
 * holder's lease.
 *
 * <p>What the token cannot order: attempts of two JobManagers. After a JobManager failover (the run
 * goes on, {@link PostgresRunRegistry#continueRun}) Flink numbers attempts from 0 again, and gives tasks
 * nothing else that is ordered across JobManagers. When both restored the same checkpoint (the old
 * JobManager restarted the job from the latest checkpoint and died before the next one completed):
 * a new attempt is refused as {@link Verdict#STALE} until its attempt number passes the old
 * JobManager's recorded one (each refusal a restart); and an old JobManager's attempt with a higher
 * number that froze before its first statement would, woken after the new attempt won, count as
 * newer and roll back the new attempt's transactions, a completed checkpoint's too. That needs a
 * JobManager failover during a restart storm and a frozen TaskManager at once; docs/operations.md
 * (section 6) names it as a limit. Ordering such ties by lease instead would let any woken zombie
 * of one JobManager take over from an idle successor.
 *
 * @param run the run the attempt belongs to
 * @param restoredCheckpoint the restored checkpoint id, {@link #NO_CHECKPOINT} on a fresh start
 * @param claimer the subtask index of the attempt (not of the claimed index, which may be another)
 * @param attempt Flink's attempt number of that subtask
 */
@Internal
public record ClaimToken(long run, long restoredCheckpoint, int claimer, int attempt) {
    /** Sorts before every checkpoint id (Flink's start at 1). */
    public static final long NO_CHECKPOINT = 0;

    /** How a claimant relates to the current claim of an index. */
    public enum Verdict {
        /** No claim yet, or the claimant is newer: it takes the index, terminating the holder. */
        NEWER,
        /** The claimant is older: a zombie. It must not touch the index. */
        STALE,
        /** Cannot be ordered: the claimant waits for the holder to go or its lease to expire. */
        UNDECIDED
    }

    /** How this token relates to {@code current}, the token of the index's current claim (null: none). */
    public Verdict against(ClaimToken current) {
        if (current == null) {
            return Verdict.NEWER;
        }
        int order = Long.compare(run, current.run);
        if (order == 0) {
            order = Long.compare(restoredCheckpoint, current.restoredCheckpoint);
        }
        if (order == 0) {
            if (claimer != current.claimer) {
                return Verdict.UNDECIDED;
            }
            order = Integer.compare(attempt, current.attempt);
        }
        return order > 0 ? Verdict.NEWER : Verdict.STALE;
    }

    @Override
    public String toString() {
        return "run " + run + ", restored checkpoint "
                + (restoredCheckpoint == NO_CHECKPOINT ? "none" : String.valueOf(restoredCheckpoint))
                + ", subtask " + claimer + " attempt " + attempt;
    }
}
