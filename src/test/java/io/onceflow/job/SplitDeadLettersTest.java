package io.onceflow.job;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.api.Event;
import io.onceflow.ingest.DeadLetter;
import io.onceflow.ingest.DeadLetterReason;
import io.onceflow.ingest.IngestResult;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.util.OneInputStreamOperatorTestHarness;
import org.apache.flink.streaming.util.ProcessFunctionTestHarnesses;
import org.junit.jupiter.api.Test;

class SplitDeadLettersTest {

    @Test
    void acceptedEventsGoOnAndDeadLettersGoToTheSideOutputInOrder() throws Exception {
        try (OneInputStreamOperatorTestHarness<IngestResult, Event> harness =
                ProcessFunctionTestHarnesses.forProcessFunction(new SplitDeadLetters())) {
            harness.processElement(IngestResult.accepted(event("a", 0)), 0);
            harness.processElement(IngestResult.rejected(deadLetter(DeadLetterReason.MALFORMED_JSON, 1)), 0);
            harness.processElement(IngestResult.accepted(event("b", 2)), 0);
            harness.processElement(IngestResult.rejected(deadLetter(DeadLetterReason.NULL_VALUE, 3)), 0);

            assertThat(harness.extractOutputValues()).extracting(e -> e.messageId).containsExactly("a", "b");
            assertThat(harness.getSideOutput(SplitDeadLetters.DEAD_LETTERS))
                    .extracting(StreamRecord::getValue)
                    .extracting(d -> d.reason + "@" + d.sourceOffset)
                    .containsExactly("MALFORMED_JSON@1", "NULL_VALUE@3");
        }
    }

    private static Event event(String id, long offset) {
        return new Event(id, "{}".getBytes(StandardCharsets.UTF_8), "in", 0, offset, 0L, Map.of());
    }

    private static DeadLetter deadLetter(DeadLetterReason reason, long offset) {
        return new DeadLetter(null, null, reason, "bad", "in", 0, offset, 0L, Map.of());
    }
}
