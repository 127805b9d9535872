package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.internal.fencing.ClaimToken;
import io.onceflow.sink.postgres.internal.fencing.ClaimToken.Verdict;
import org.junit.jupiter.api.Test;
import static org.assertj.core.api.Assertions.assertThat;

/** The verdicts of {@link ClaimToken}, case by case (the database tests play them: DeferredClaimTest). */
class ClaimTokenTest {
    private static ClaimToken token(long run, long checkpoint, int claimer, int attempt) {
        return new ClaimToken(run, checkpoint, claimer, attempt);
    }

    @Test
    void anImmediateClaimWinsOnlyOverAClaimMadeBeforeItsRestoredCheckpointCompleted() {
        ClaimToken restored5 = token(7, 5, 0, 0);
        assertThat(restored5.immediately(null)).isEqualTo(Verdict.NEWER);
        assertThat(restored5.immediately(token(6, 9, 0, 3))).as("an older run").isEqualTo(Verdict.NEWER);
        assertThat(restored5.immediately(token(8, 1, 0, 0))).as("a newer run").isEqualTo(Verdict.STALE);
        assertThat(restored5.immediately(token(7, 4, 0, 9))).as("claimed before 5 completed").isEqualTo(Verdict.NEWER);
        // the tie of two JobManagers: attempt numbers say nothing across them
        assertThat(restored5.immediately(token(7, 5, 0, 5))).isEqualTo(Verdict.DEFER);
        assertThat(restored5.immediately(token(7, 5, 0, 0))).isEqualTo(Verdict.DEFER);
        assertThat(restored5.immediately(token(7, 8, 1, 0))).as("claimed at a later barrier").isEqualTo(Verdict.DEFER);
    }

    @Test
    void aClaimAtABarrierIsOrderedByTheBarriersCheckpointId() {
        ClaimToken barrier8 = token(7, 5, 0, 0).at(8);
        assertThat(barrier8.claimCheckpoint()).isEqualTo(8);
        assertThat(barrier8.against(token(7, 5, 0, 9))).isEqualTo(Verdict.NEWER);
        assertThat(barrier8.against(token(7, 9, 0, 0))).as("a later barrier: a zombie").isEqualTo(Verdict.STALE);
        assertThat(barrier8.against(token(7, 8, 1, 0))).as("another claimer, same barrier").isEqualTo(Verdict.UNDECIDED);
        assertThat(barrier8.against(barrier8)).as("its own claim, made again").isEqualTo(Verdict.NEWER);
        assertThat(barrier8.against(token(8, 1, 0, 0))).as("a newer run").isEqualTo(Verdict.STALE);
    }
}
