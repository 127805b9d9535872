package io.onceflow.sink.postgres.internal.fencing;

import org.apache.flink.annotation.Internal;

/**
 * Internal. The fencing token of one writer attempt's claim, and the rules that order two attempts
 * that claim the same subtask index of a sink prefix (see {@link WriterFence}).
 *
 * <p>The order must be Flink's order of attempts, not the order in which they reach the database:
 * an attempt that stalls (GC pause, frozen VM, SIGSTOP) before its first statement reaches the
 * database after its successor did. And it must hold across JobManagers: after a JobManager
 * failover Flink numbers attempts from 0 again, so attempt numbers order nothing. What does survive
 * a failover is the checkpoint counter (kept in HA storage, it only grows). So the token is:
 *
 * <ol>
 *   <li>{@code run}: issued by the database when the job was submitted ({@link SinkRuns}), so a
 *       later submission (an upgrade from a savepoint, a rollback to an older one) is newer than
 *       every attempt of an earlier one;
 *   <li>{@code claimCheckpoint}: a checkpoint id that Flink's counter issued before or to the
 *       attempt. An attempt first tries an <em>immediate</em> claim with the checkpoint it restored,
 *       N ({@link #NO_CHECKPOINT} on a fresh start): N completed before the attempt started, so an
 *       index whose claim checkpoint is lower was claimed before N completed, by an older attempt
 *       ({@link #immediately}). If the index's claim is N or higher, the attempt cannot tell whether
 *       it is older or newer (two attempts of two JobManagers may both have restored N): it
 *       <em>defers</em> ({@link Verdict#DEFER}), touching nothing, until its first checkpoint barrier
 *       c. Flink triggers a checkpoint only once every task finished initialising, i.e. after this
 *       attempt read the claim rows, so c is greater than every claim checkpoint recorded before,
 *       across JobManagers; it claims with c, in {@link #against order}.
 *   <li>{@code claimer} and {@code attempt}: break ties only. Equal claim checkpoints of different
 *       claimers (an old index recovered by another subtask after an in-job rescale) cannot be
 *       ordered ({@link Verdict#UNDECIDED}: the fence falls back to the holder's lease); of the same
 *       claimer, the attempt numbers decide, which is the claim's own record when they are equal.
 * </ol>
 *
 * <p>One shortcut: an immediate claim whose restored checkpoint equals the index's claim checkpoint
 * and whose attempt number is higher (same subtask) claims at once instead of deferring. Within one
 * JobManager that is Flink's order (a restart before the next checkpoint completed, the common case,
 * so deferring, which holds the interval's events in memory, stays rare: after a JobManager
 * failover). Across JobManagers it is safe while the new JobManager's attempts defer (they record
 * nothing, prepare nothing), and after its first barrier claim (a higher claim checkpoint). What it
 * leaves open: a new JobManager that restarts the job more often, before its first completed
 * checkpoint, than the old one had, and a frozen attempt of the old JobManager with a still higher
 * number waking after that: docs/failover.md, "JobManager failover".
 *
 * <p>Why this fences zombies: a zombie of a dead JobManager that restored N and wakes up late finds
 * a claim of N or higher and defers; it never receives a barrier from the new JobManager, so it never
 * claims, rolls back or prepares. A zombie that was frozen inside a barrier of the old JobManager, c,
 * finds a claim with a later barrier and stops ({@link Verdict#STALE}).
 *
 * <p>The rare limit: a bounded input that ends while an attempt still defers (a restart, then end of
 * input before the next barrier) has no barrier to claim with: that claim falls back to the restored
 * checkpoint and, for the same claimer, the attempt number, as
 * before deferred claims existed (attempt numbers of two JobManagers are not ordered).
 *
 * @param run the run the attempt belongs to
 * @param claimCheckpoint the checkpoint id the claim is made with (stored in the writers table's
 *     {@code restored_checkpoint} column, its name from before deferred claims)
 * @param claimer the subtask index of the attempt (not of the claimed index, which may be another)
 * @param attempt Flink's attempt number of that subtask
 */
@Internal
public record ClaimToken(long run, long claimCheckpoint, int claimer, int attempt) {
    /** Sorts before every checkpoint id (Flink's start at 1). */
    public static final long NO_CHECKPOINT = 0;

    /** How a claimant relates to the current claim of an index. */
    public enum Verdict {
        /** No claim yet, or the claimant is newer: it takes the index, terminating the holder. */
        NEWER,
        /** The claimant is older: a zombie. It must not touch the index. */
        STALE,
        /** Cannot be ordered: the claimant waits for the holder to go or its lease to expire. */
        UNDECIDED,
        /** Cannot be ordered yet: the claimant touches nothing until its first checkpoint barrier. */
        DEFER
    }

    /**
     * The verdict on an immediate claim, with the restored checkpoint, against {@code current} (null:
     * none): newer if the current claim was made before the restored checkpoint completed, or, with the
     * same restored checkpoint, by a lower attempt number of the same subtask (a restart by the same
     * JobManager); otherwise it defers.
     */
    public Verdict immediately(ClaimToken current) {
        if (current == null || current.run < run) {
            return Verdict.NEWER;
        }
        if (current.run > run) {
            return Verdict.STALE;
        }
        if (claimCheckpoint > current.claimCheckpoint) {
            return Verdict.NEWER;
        }
        // A restart of the same subtask by the same JobManager before a checkpoint completed: Flink
        // numbers its attempts in order, so a higher number is newer and claims at once (no events
        // held in memory until a barrier). After a JobManager failover the numbers start at 0 again:
        // lower or equal, so it defers.
        return claimCheckpoint == current.claimCheckpoint && claimer == current.claimer && attempt > current.attempt
                ? Verdict.NEWER : Verdict.DEFER;
    }

    /**
     * The verdict on a claim at a checkpoint barrier, or at the end of input, against
     * {@code current} (null: none): run, then claim checkpoint, then, for the same claimer, attempt.
     */
    public Verdict against(ClaimToken current) {
        if (current == null) {
            return Verdict.NEWER;
        }
        int order = Long.compare(run, current.run);
        if (order == 0) {
            order = Long.compare(claimCheckpoint, current.claimCheckpoint);
        }
        if (order == 0) {
            if (claimer != current.claimer) {
                return Verdict.UNDECIDED;
            }
            order = Integer.compare(attempt, current.attempt);
        }
        return order >= 0 ? Verdict.NEWER : Verdict.STALE; // equal: this attempt's own claim, made again
    }

    /** This attempt's token for a claim with {@code checkpointId}. */
    public ClaimToken at(long checkpointId) {
        return new ClaimToken(run, checkpointId, claimer, attempt);
    }

    @Override
    public String toString() {
        return "run " + run + ", claim checkpoint "
                + (claimCheckpoint == NO_CHECKPOINT ? "none" : String.valueOf(claimCheckpoint))
                + ", subtask " + claimer + " attempt " + attempt;
    }
}
