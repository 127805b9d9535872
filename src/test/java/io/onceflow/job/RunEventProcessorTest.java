package io.onceflow.job;

import io.onceflow.api.Event;
import io.onceflow.api.EventProcessor;
import io.onceflow.api.EventRejectedException;
import io.onceflow.api.TransientProcessingException;
import io.onceflow.config.ProcessorRetries;
import io.onceflow.ingest.DeadLetter;
import io.onceflow.sink.kafka.OnceflowHeaders;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.functions.AbstractRichFunction;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.CheckpointListener;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.Metric;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.clusterframework.types.ResourceID;
import org.apache.flink.runtime.executiongraph.ExecutionAttemptID;
import org.apache.flink.runtime.metrics.groups.TaskManagerMetricGroup;
import org.apache.flink.runtime.metrics.util.TestingMetricRegistry;
import org.apache.flink.runtime.operators.testutils.MockEnvironment;
import org.apache.flink.runtime.operators.testutils.MockEnvironmentBuilder;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.operators.ProcessOperator;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.util.OneInputStreamOperatorTestHarness;
import org.apache.flink.util.Collector;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;


class RunEventProcessorTest {
    private static final ProcessorRetries THREE_FAST_ATTEMPTS =
            new ProcessorRetries(3, Duration.ofMillis(1), Duration.ofMillis(2));
    private static final byte[] PAYLOAD = "{\"amount\":-5}".getBytes(UTF_8);

    /** Every metric the harnesses' operators registered, by full identifier. */
    private final Map<String, Metric> metrics = new ConcurrentHashMap<>();
    private final List<AutoCloseable> toClose = new ArrayList<>();

    @AfterEach
    void close() throws Exception {
        for (int i = toClose.size() - 1; i >= 0; i--) {
            toClose.get(i).close();
        }
    }

    /** A harness whose operator's metrics land in {@link #metrics}; set up, not yet opened. */
    private OneInputStreamOperatorTestHarness<Event, Event> harness(EventProcessor processor, ProcessorRetries retries)
            throws Exception {
        TestingMetricRegistry registry = TestingMetricRegistry.builder()
                .setRegisterConsumer((metric, name, group) -> metrics.put(group.getMetricIdentifier(name), metric))
                .build();
        MockEnvironment environment = new MockEnvironmentBuilder()
                .setMetricGroup(TaskManagerMetricGroup.createTaskManagerMetricGroup(registry, "localhost", ResourceID.generate())
                        .addJob(new JobID(), "job")
                        .addTask(ExecutionAttemptID.randomId(), "task"))
                .build();
        toClose.add(environment);
        OneInputStreamOperatorTestHarness<Event, Event> harness = new OneInputStreamOperatorTestHarness<>(
                new ProcessOperator<>(new RunEventProcessor(processor, retries)), environment);
        toClose.add(harness);
        return harness;
    }

    private OneInputStreamOperatorTestHarness<Event, Event> opened(EventProcessor processor, ProcessorRetries retries)
            throws Exception {
        OneInputStreamOperatorTestHarness<Event, Event> harness = harness(processor, retries);
        harness.open();
        return harness;
    }

    private long counter(String name) {
        return metrics.entrySet().stream()
                .filter(metric -> metric.getKey().endsWith("." + name))
                .map(metric -> ((Counter) metric.getValue()).getCount())
                .findFirst()
                .orElseThrow(() -> new AssertionError("no metric " + name + " among " + metrics.keySet()));
    }

    /** The source record's key, unlike the message id: a dead letter must carry this one. */
    private static final byte[] SOURCE_KEY = "account-7".getBytes(UTF_8);

    private static Event event(String id) {
        Event event = new Event(id, PAYLOAD.clone(), "payments", 3, 42, 1_700_000_000_000L, Map.of("trace", "t-1".getBytes(UTF_8)));
        event.sourceKey = SOURCE_KEY.clone();
        return event;
    }

    /** What a processor emits: the event as it is now, under another id. */
    private static Event derived(Event event, String id) {
        return new Event(id, event.payload, event.sourceTopic, event.sourcePartition, event.sourceOffset,
                event.sourceTimestamp, event.headers);
    }

    private static List<DeadLetter> deadLetters(OneInputStreamOperatorTestHarness<Event, Event> harness) {
        var deadLetters = harness.getSideOutput(RunEventProcessor.DEAD_LETTERS);
        return deadLetters == null ? List.of() : deadLetters.stream().map(StreamRecord::getValue).toList();
    }

    @Test
    void aRejectedEventIsDeadLetteredAsReceivedWithTheProcessorsReasonAndNothingItEmitted() throws Exception {
        AtomicInteger attempts = new AtomicInteger();
        var harness = opened((event, out) -> {
            attempts.incrementAndGet();
            out.collect(derived(event, event.messageId + ":partial"));
            event.payload = "changed".getBytes(UTF_8);
            throw new EventRejectedException("negative amount:\n" + "x".repeat(5000));
        }, THREE_FAST_ATTEMPTS);

        harness.processElement(event("p-1"), 0);

        assertThat(harness.extractOutputValues()).isEmpty();
        assertThat(attempts).as("a rejection is never retried").hasValue(1);
        DeadLetter deadLetter = deadLetters(harness).get(0);
        assertThat(deadLetter.reason).isEqualTo("REJECTED_BY_PROCESSOR");
        assertThat(deadLetter.key).as("the source record's key, as ingest's dead letters").isEqualTo(SOURCE_KEY);
        assertThat(deadLetter.value).as("the payload as received").isEqualTo(PAYLOAD);
        assertThat(deadLetter.headers).containsOnlyKeys("trace");
        assertThat(deadLetter.sourceTopic + "-" + deadLetter.sourcePartition + "@" + deadLetter.sourceOffset)
                .isEqualTo("payments-3@42");
        assertThat(deadLetter.sourceTimestamp).isEqualTo(1_700_000_000_000L);
        assertThat(deadLetter.errorMessage).startsWith("negative amount:\\u000axxx").contains("5017 chars in all")
                .hasSizeLessThan(RunEventProcessor.MAX_ERROR_CHARS + 50);
        assertThat(counter("deadLetters.REJECTED_BY_PROCESSOR")).isEqualTo(1);
        assertThat(counter("processorRetries")).isZero();
    }

    @Test
    void anEventTheProcessorEmitsNothingForIsRecordedAsFilteredWithoutItsPayload() throws Exception {
        var harness = opened((event, out) -> {
            if (!event.messageId.startsWith("drop-")) {
                out.collect(event);
            }
        }, THREE_FAST_ATTEMPTS);

        harness.processElement(event("drop-1"), 0);
        harness.processElement(event("keep-1"), 0);

        assertThat(harness.extractOutputValues()).extracting(output -> output.messageId).containsExactly("keep-1");
        assertThat(deadLetters(harness)).singleElement().satisfies(filtered -> {
            assertThat(filtered.reason).isEqualTo("FILTERED_BY_PROCESSOR");
            assertThat(filtered.value).as("no payload: the input record is found by its coordinates").isNull();
            assertThat(filtered.key).as("the source record's key, as every dead letter").isEqualTo(SOURCE_KEY);
            assertThat(filtered.sourceTopic + "-" + filtered.sourcePartition + "@" + filtered.sourceOffset)
                    .isEqualTo("payments-3@42");
            assertThat(filtered.headers).as("only the message id, not the input's headers")
                    .containsOnlyKeys(OnceflowHeaders.MESSAGE_ID);
            assertThat(new String(filtered.headers.get(OnceflowHeaders.MESSAGE_ID), UTF_8)).isEqualTo("drop-1");
            assertThat(filtered.errorMessage).isEqualTo(RunEventProcessor.FILTERED_ERROR);
        });
        assertThat(counter("deadLetters.FILTERED_BY_PROCESSOR")).isEqualTo(1);
    }

    /** Review: only the attempt that returns decides whether an event was filtered. */
    @Test
    void onlyTheLastAttemptDecidesWhetherAnEventIsFilteredAndDerivedOutputIsNoFilter() throws Exception {
        AtomicInteger attempts = new AtomicInteger();
        var harness = opened((event, out) -> {
            int attempt = attempts.incrementAndGet();
            if (event.messageId.equals("emits-on-retry") && attempt == 1) {
                throw new IOException("nothing emitted on the first attempt, it threw");
            }
            if (event.messageId.equals("emits-on-retry")) {
                out.collect(event);
            }
            if (event.messageId.equals("emits-then-drops") && attempt == 3) {
                out.collect(event);
                throw new IOException("emitted, then failed");
            }
            if (event.messageId.equals("derived-only")) {
                out.collect(derived(event, event.messageId + ":x"));
            }
        }, THREE_FAST_ATTEMPTS);

        harness.processElement(event("emits-on-retry"), 0);
        harness.processElement(event("emits-then-drops"), 0); // attempt 3 fails, attempt 4 returns having emitted nothing
        harness.processElement(event("derived-only"), 0);

        assertThat(harness.extractOutputValues()).extracting(output -> output.messageId)
                .containsExactly("emits-on-retry", "derived-only:x");
        assertThat(deadLetters(harness)).singleElement().satisfies(filtered -> {
            assertThat(filtered.reason).isEqualTo("FILTERED_BY_PROCESSOR");
            assertThat(new String(filtered.headers.get(OnceflowHeaders.MESSAGE_ID), UTF_8)).isEqualTo("emits-then-drops");
        });
    }

    /**
     * A processor that holds an event and emits it while processing the next one (a pair, a
     * CheckpointedFunction's buffer) says so with {@code emptyOutputMeansFiltered() == false}: the
     * held event gets no filter record, only its output. By default it would get both, which the
     * audit reports as an id with two outcomes.
     */
    @Test
    void aProcessorThatHoldsEventsGetsNoFilterRecordForTheOneItHolds() throws Exception {
        var harness = opened(new PairingProcessor(false), THREE_FAST_ATTEMPTS);
        harness.processElement(event("held-1"), 0);
        harness.processElement(event("pair-1"), 0);

        assertThat(harness.extractOutputValues()).extracting(output -> output.messageId)
                .containsExactly("held-1", "pair-1");
        assertThat(deadLetters(harness)).isEmpty();
    }

    @Test
    void byDefaultAnEventWithNoOutputIsFilteredEvenIfItsOutputComesLater() throws Exception {
        var harness = opened(new PairingProcessor(true), THREE_FAST_ATTEMPTS);
        harness.processElement(event("held-1"), 0);
        harness.processElement(event("pair-1"), 0);

        assertThat(deadLetters(harness)).singleElement().satisfies(filtered ->
                assertThat(new String(filtered.headers.get(OnceflowHeaders.MESSAGE_ID), UTF_8)).isEqualTo("held-1"));
    }

    /** Emits nothing for an event until the next one comes, then both. */
    private static final class PairingProcessor implements EventProcessor {
        private static final long serialVersionUID = 1L;
        private final boolean emptyOutputMeansFiltered;
        private Event held;

        PairingProcessor(boolean emptyOutputMeansFiltered) {
            this.emptyOutputMeansFiltered = emptyOutputMeansFiltered;
        }

        @Override
        public boolean emptyOutputMeansFiltered() {
            return emptyOutputMeansFiltered;
        }

        @Override
        public void flatMap(Event event, Collector<Event> out) {
            if (held == null) {
                held = event;
                return;
            }
            out.collect(held);
            out.collect(event);
            held = null;
        }
    }

    @Test
    void anEventThatFailsTwiceIsForwardedOnceWithNothingOfTheFailedAttempts() throws Exception {
        AtomicInteger attempts = new AtomicInteger();
        var harness = opened((event, out) -> {
            int attempt = attempts.incrementAndGet();
            out.collect(derived(event, event.messageId + ":attempt-" + attempt));
            event.payload = ("changed by attempt " + attempt).getBytes(UTF_8);
            if (attempt < 3) {
                throw new IOException("service unavailable");
            }
        }, THREE_FAST_ATTEMPTS);

        harness.processElement(event("a"), 0);

        assertThat(harness.extractOutputValues()).singleElement().satisfies(output -> {
            assertThat(output.messageId).isEqualTo("a:attempt-3");
            assertThat(output.payload).as("the failed attempts' changes are gone").isEqualTo(PAYLOAD);
        });
        assertThat(deadLetters(harness)).isEmpty();
        assertThat(counter("processorRetries")).isEqualTo(2);
    }

    @Test
    void anEventThatAlwaysFailsIsDeadLetteredAfterTheLastAttemptAndTheNextOneGoesOn() throws Exception {
        AtomicInteger attempts = new AtomicInteger();
        var harness = opened((event, out) -> {
            if (event.messageId.equals("bug")) {
                attempts.incrementAndGet();
                event.payload = "changed".getBytes(UTF_8);
                throw new IllegalArgumentException("no rate for currency 'XYZ'");
            }
            out.collect(event);
        }, THREE_FAST_ATTEMPTS);

        harness.processElement(event("bug"), 0);
        harness.processElement(event("fine"), 0);

        assertThat(attempts).hasValue(3);
        assertThat(deadLetters(harness)).singleElement().satisfies(deadLetter -> {
            assertThat(deadLetter.reason).isEqualTo("PROCESSOR_FAILED");
            assertThat(deadLetter.errorMessage)
                    .isEqualTo("java.lang.IllegalArgumentException: no rate for currency 'XYZ' (after 3 attempts)");
            assertThat(deadLetter.key).as("the source record's key, as ingest's dead letters").isEqualTo(SOURCE_KEY);
            assertThat(deadLetter.value).isEqualTo(PAYLOAD);
        });
        assertThat(harness.extractOutputValues()).extracting(output -> output.messageId).containsExactly("fine");
        assertThat(counter("deadLetters.PROCESSOR_FAILED")).isEqualTo(1);
        assertThat(counter("processorRetries")).isEqualTo(2);
    }

    @Test
    void aTransientFailureIsRetriedBeyondTheAttemptsUntilItPasses() throws Exception {
        AtomicInteger attempts = new AtomicInteger();
        var harness = opened((event, out) -> {
            if (attempts.incrementAndGet() <= 5) {
                throw new TransientProcessingException("rates service down", new IOException("connection refused"));
            }
            out.collect(event);
        }, new ProcessorRetries(2, Duration.ofMillis(1), Duration.ofMillis(2)));

        harness.processElement(event("t"), 0);

        assertThat(harness.extractOutputValues()).extracting(output -> output.messageId).containsExactly("t");
        assertThat(deadLetters(harness)).isEmpty();
        assertThat(counter("processorRetries")).isEqualTo(5);
    }

    @Test
    void anErrorOrAnInterruptionFailsTheTaskAtOnce() throws Exception {
        AtomicInteger attempts = new AtomicInteger();
        var crashing = opened((event, out) -> {
            attempts.incrementAndGet();
            throw new LinkageError("simulated crash");
        }, THREE_FAST_ATTEMPTS);
        assertThatThrownBy(() -> crashing.processElement(event("e"), 0)).isExactlyInstanceOf(LinkageError.class);

        var cancelled = opened((event, out) -> {
            attempts.incrementAndGet();
            Thread.currentThread().interrupt();
            throw new IOException("interrupted while reading");
        }, THREE_FAST_ATTEMPTS);
        try {
            assertThatThrownBy(() -> cancelled.processElement(event("i"), 0)).isExactlyInstanceOf(IOException.class);
        } finally {
            Thread.interrupted();
        }

        assertThat(attempts).as("no retry").hasValue(2);
        assertThat(deadLetters(crashing)).isEmpty();
        assertThat(deadLetters(cancelled)).isEmpty();
    }

    @Test
    void aRichProcessorGetsTheRuntimeContextAndIsOpenedAndClosed() throws Exception {
        RichProcessor processor = new RichProcessor();
        var harness = opened(processor, THREE_FAST_ATTEMPTS);
        harness.processElement(event("r"), 0);
        toClose.remove(harness);
        harness.close();

        assertThat(processor.calls).containsExactly("open subtask 0", "flatMap r", "close");
    }

    @Test
    void aCheckpointedProcessorsStateIsSnapshottedAndRestoredAndItHearsOfCompletedCheckpoints() throws Exception {
        CountingProcessor before = new CountingProcessor();
        var first = opened(before, THREE_FAST_ATTEMPTS);
        first.processElement(event("a"), 0);
        first.processElement(event("b"), 0);
        OperatorSubtaskState snapshot = first.snapshot(1, 0);
        first.notifyOfCompletedCheckpoint(1);
        assertThat(before.completedCheckpoints).containsExactly(1L);

        CountingProcessor after = new CountingProcessor();
        var restored = harness(after, THREE_FAST_ATTEMPTS);
        restored.initializeState(snapshot);
        restored.open();
        restored.processElement(event("c"), 0);

        assertThat(restored.extractOutputValues()).extracting(output -> output.messageId).containsExactly("c#3");
    }

    /** Records its life cycle; fails in {@code open} unless it was given the runtime context. */
    private static final class RichProcessor extends AbstractRichFunction implements EventProcessor {
        private static final long serialVersionUID = 1L;
        final List<String> calls = new ArrayList<>();

        @Override
        public void open(OpenContext openContext) {
            calls.add("open subtask " + getRuntimeContext().getTaskInfo().getIndexOfThisSubtask());
        }

        @Override
        public void flatMap(Event event, Collector<Event> out) {
            calls.add("flatMap " + event.messageId);
            out.collect(event);
        }

        @Override
        public void close() {
            calls.add("close");
        }
    }

    /** Numbers the events it sees, in operator state, as {@code <id>#<n>}. */
    private static final class CountingProcessor implements EventProcessor, CheckpointedFunction, CheckpointListener {
        private static final long serialVersionUID = 1L;
        final List<Long> completedCheckpoints = new ArrayList<>();
        private transient ListState<Long> countState;
        private long count;

        @Override
        public void initializeState(FunctionInitializationContext context) throws Exception {
            countState = context.getOperatorStateStore().getListState(new ListStateDescriptor<>("count", Types.LONG));
            for (long restored : countState.get()) {
                count += restored;
            }
        }

        @Override
        public void snapshotState(FunctionSnapshotContext context) throws Exception {
            countState.update(List.of(count));
        }

        @Override
        public void notifyCheckpointComplete(long checkpointId) {
            completedCheckpoints.add(checkpointId);
        }

        @Override
        public void flatMap(Event event, Collector<Event> out) {
            count++;
            out.collect(derived(event, event.messageId + "#" + count));
        }
    }
}
