package io.onceflow.sink.postgres.internal;

import org.apache.flink.annotation.Internal;

/**
 * Internal. The fencing token of one writer attempt's claim, and the rule that orders two attempts
 * that claim the same subtask index of a sink prefix (see {@link WriterClaim}).
 *
 * <p>The order must be Flink's order of attempts, not the order in which they reach the database:
 * an attempt that stalls (GC pause, frozen VM, SIGSTOP) reaches the database after its successor
 * did. It must also hold across JobManagers, which number attempts from 0 again. One rule gives
 * both: <b>every attempt claims at its first checkpoint barrier, with that barrier's id</b>. Flink's
 * checkpoint counter only grows (it survives a JobManager failover in HA storage), a barrier id
 * belongs to one execution, and one execution covers each subtask index once. So a later attempt
 * always claims with a higher barrier id than an earlier one, whenever each reaches the database,
 * and the token is:
 *
 * <ol>
 *   <li>{@code run}: issued by the database when the job was submitted ({@link SinkRuns}), so a
 *       later submission (an upgrade from a savepoint, a rollback to an older one) is newer than
 *       every attempt of an earlier one;
 *   <li>{@code claimCheckpoint}: the id of the barrier the attempt claimed at.
 * </ol>
 *
 * <p>{@code claimer} and {@code attempt} order nothing; they say who claimed, for operators and for
 * the claimant's check that the claim it reads back is its own.
 *
 * @param run the run the attempt belongs to
 * @param claimCheckpoint the barrier the claim is made at (stored in the writers table's
 *     {@code restored_checkpoint} column, its name from before claims moved to barriers)
 * @param claimer the subtask index of the attempt (not of the claimed index, which may be another)
 * @param attempt Flink's attempt number of that subtask
 */
@Internal
public record ClaimToken(long run, long claimCheckpoint, int claimer, int attempt) {
    /** Sorts before every checkpoint id (Flink's start at 1); rows from before barrier claims may hold it. */
    public static final long NO_CHECKPOINT = 0;

    /**
     * Whether this claim may take the index from {@code current} (null: unclaimed): a newer run, or
     * the same run and a later barrier, or this very claim made again. Anything else is an older
     * attempt, a zombie: it must not touch the index. Two different claims with the same run and
     * barrier cannot happen in Flink; if they did, the first one keeps the index.
     */
    public boolean supersedes(ClaimToken current) {
        if (current == null || equals(current)) {
            return true;
        }
        if (run != current.run) {
            return run > current.run;
        }
        return claimCheckpoint > current.claimCheckpoint;
    }

    @Override
    public String toString() {
        return "run " + run + ", claim checkpoint "
                + (claimCheckpoint == NO_CHECKPOINT ? "none" : String.valueOf(claimCheckpoint))
                + ", subtask " + claimer + " attempt " + attempt;
    }
}
