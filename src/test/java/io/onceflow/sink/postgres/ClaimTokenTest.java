package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.internal.ClaimToken;
import org.junit.jupiter.api.Test;
import static org.assertj.core.api.Assertions.assertThat;

/** The one rule of {@link ClaimToken}, case by case (the database tests play it: PostgresFencingTest). */
class ClaimTokenTest {
    private static ClaimToken token(long run, long barrier, int claimer, int attempt) {
        return new ClaimToken(run, barrier, claimer, attempt);
    }

    @Test
    void aClaimIsOrderedByRunThenBarrierAndNeverByAttemptNumbers() {
        ClaimToken barrier8 = token(7, 8, 0, 0);
        assertThat(barrier8.supersedes(null)).as("unclaimed").isTrue();
        assertThat(barrier8.supersedes(token(7, 5, 0, 9))).as("an earlier barrier, a higher attempt").isTrue();
        assertThat(barrier8.supersedes(token(6, 90, 1, 3))).as("an older run").isTrue();
        assertThat(barrier8.supersedes(token(7, 9, 0, 0))).as("a later barrier: this one is a zombie").isFalse();
        assertThat(barrier8.supersedes(token(8, 1, 0, 0))).as("a newer run").isFalse();
        assertThat(barrier8.supersedes(barrier8)).as("its own claim, made again").isTrue();
    }

    @Test
    void twoClaimsAtOneBarrierCannotHappenAndTheFirstKeepsTheIndex() {
        assertThat(token(7, 8, 0, 0).supersedes(token(7, 8, 1, 0))).isFalse();
        assertThat(token(7, 8, 0, 1).supersedes(token(7, 8, 0, 0))).isFalse();
    }
}
