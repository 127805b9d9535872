package io.onceflow.sink.kafka;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** An attempt's writer and committer share its tag; what one of them took alone is not handed on. */
class AttemptTagsTest {

    @Test
    void theWriterGetsTheTagItsCommitterTookAndNoOneElseDoes() {
        String committers = AttemptTags.take(SinkAttempts.committerContext(3), "tags-a");
        String writers = AttemptTags.take(SinkAttempts.committerContext(3), "tags-a");
        assertThat(writers).isEqualTo(committers);
        assertThat(AttemptTags.isTag(writers)).isTrue();
        assertThat(AttemptTags.take(SinkAttempts.committerContext(3), "tags-a")).as("a third take: a new pair")
                .isNotEqualTo(writers);
    }

    @Test
    void aTagTakenByACommitterWhoseWriterNeverStartedIsNotALaterAttemptsWithTheSameNumber() {
        // the committer starts first (Flink starts a chain from its tail); its writer fails before it takes
        String failed = AttemptTags.take(SinkAttempts.committerContext(4), "tags-b");
        AttemptTags.release(SinkAttempts.committerContext(4), "tags-b", failed);

        // attempt 4 again after a JobManager failover, on the same TaskManager
        assertThat(AttemptTags.take(SinkAttempts.committerContext(4), "tags-b")).isNotEqualTo(failed);
    }
}
