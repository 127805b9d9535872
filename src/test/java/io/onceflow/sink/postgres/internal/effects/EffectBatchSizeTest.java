package io.onceflow.sink.postgres.internal.effects;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The effect worker's next batch size ({@link EffectWorker#nextLimit}): doubled, within the batch size and the batch time. */
class EffectBatchSizeTest {
    private static final int MAX = 1000;

    @Test
    void fastEffectsDoubleUpToTheBatchSize() {
        long twentyMicros = TimeUnit.MICROSECONDS.toNanos(20);
        assertThat(EffectWorker.nextLimit(1, 1, twentyMicros, MAX)).isEqualTo(2);
        assertThat(EffectWorker.nextLimit(600, 600, 600 * twentyMicros, MAX)).isEqualTo(MAX);
    }

    @Test
    void slowEffectsKeepABatchNearTheBatchTime() {
        long twoMillis = TimeUnit.MILLISECONDS.toNanos(2);
        int limit = EffectWorker.nextLimit(MAX, MAX, MAX * twoMillis, MAX);
        assertThat(limit).isEqualTo((int) (EffectWorker.BATCH_TIME.toNanos() / twoMillis));
        assertThat(EffectWorker.nextLimit(1, 1, TimeUnit.SECONDS.toNanos(3), MAX)).as("one slower than the batch time")
                .isEqualTo(1);
    }

    @Test
    void aBatchThatTookNothingDoubles() {
        assertThat(EffectWorker.nextLimit(8, 0, 0, MAX)).isEqualTo(16);
    }
}
