package io.onceflow.job;

import io.onceflow.api.Event;
import io.onceflow.api.EventProcessor;
import io.onceflow.api.EventRejectedException;
import io.onceflow.api.TransientProcessingException;
import io.onceflow.config.ProcessorRetries;
import io.onceflow.ingest.DeadLetter;
import io.onceflow.ingest.DeadLetterReason;
import io.onceflow.ingest.ErrorText;
import io.onceflow.sink.kafka.OnceflowHeaders;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichFunction;
import org.apache.flink.api.common.functions.RuntimeContext;
import org.apache.flink.api.common.functions.util.ListCollector;
import org.apache.flink.api.common.state.CheckpointListener;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.functions.ProcessFunction;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;


/**
 * Runs the job's {@link EventProcessor} on each event so that no single event can stop the job:
 * an {@link EventRejectedException} sends the event to the dead-letter side output as {@code
 * REJECTED_BY_PROCESSOR}; any other exception is retried in place, {@code maxAttempts} attempts in
 * all with a doubling pause, then dead-lettered as {@code PROCESSOR_FAILED}; a {@link
 * TransientProcessingException} is retried without limit. An event for which the processor
 * returns normally having emitted nothing is filtered: a record with reason {@code
 * FILTERED_BY_PROCESSOR}, its source key and coordinates and no value, goes to the same side
 * output, so that a deliberate drop is an outcome on record and never looks like a loss. Internal to
 * the job.
 *
 * <p>Each attempt works on its own copy of the event and emits into a buffer, forwarded only when
 * the attempt succeeds: a failed attempt leaves no output and no trace on the next attempt or on
 * the dead letter, which holds the event as received. An {@link Error} and an interruption (the
 * task being cancelled) are not caught: they fail the task, and Flink restarts the job.
 *
 * <p>The processor's own life cycle is forwarded: {@link RichFunction} (runtime context, open,
 * close), {@link CheckpointedFunction} (its operator state, restored under this operator's uid)
 * and {@link CheckpointListener}.
 */
final class RunEventProcessor extends ProcessFunction<Event, Event>
        implements CheckpointedFunction, CheckpointListener {
    static final OutputTag<DeadLetter> DEAD_LETTERS = new OutputTag<>("processor-dead-letters") {};

    /** The most characters of the processor's message a dead letter keeps, so that dead letters stay small. */
    static final int MAX_ERROR_CHARS = 1000;
    /** The error text of a filtered event's record. */
    static final String FILTERED_ERROR = "the processor emitted nothing for the event";
    /** The most characters of a message id a log line quotes. */
    private static final int MAX_LOGGED_ID_CHARS = 100;
    /** At most one warning per subtask in this time, so that an outage does not flood the log. */
    private static final long WARNING_INTERVAL_NANOS = Duration.ofSeconds(10).toNanos();

    private static final long serialVersionUID = 1L;
    private static final Logger LOG = LoggerFactory.getLogger(RunEventProcessor.class);

    private final EventProcessor processor;
    private final ProcessorRetries retries;

    private transient TypeSerializer<Event> eventSerializer;
    private transient List<Event> attemptOutput;
    private transient Collector<Event> attemptCollector;
    private transient DeadLetterCounters deadLetters;
    private transient Counter processorRetries;
    private transient long lastWarningNanos;
    private transient long warningsLeftOut;
    private transient boolean warned;

    RunEventProcessor(EventProcessor processor, ProcessorRetries retries) {
        this.processor = Objects.requireNonNull(processor, "processor");
        this.retries = Objects.requireNonNull(retries, "retries");
    }

    @Override
    public void setRuntimeContext(RuntimeContext context) {
        super.setRuntimeContext(context);
        if (processor instanceof RichFunction rich) {
            rich.setRuntimeContext(context);
        }
    }

    @Override
    public void open(OpenContext openContext) throws Exception {
        RuntimeContext context = getRuntimeContext();
        eventSerializer = context.createSerializer(TypeInformation.of(Event.class));
        attemptOutput = new ArrayList<>();
        attemptCollector = new ListCollector<>(attemptOutput);
        MetricGroup metrics = context.getMetricGroup();
        deadLetters = new DeadLetterCounters(metrics, DeadLetterReason::fromProcessor);
        processorRetries = metrics.counter("processorRetries");
        if (processor instanceof RichFunction rich) {
            rich.open(openContext);
        }
    }

    @Override
    public void close() throws Exception {
        if (processor instanceof RichFunction rich) {
            rich.close();
        }
    }

    @Override
    public void initializeState(FunctionInitializationContext context) throws Exception {
        if (processor instanceof CheckpointedFunction checkpointed) {
            checkpointed.initializeState(context);
        }
    }

    @Override
    public void snapshotState(FunctionSnapshotContext context) throws Exception {
        if (processor instanceof CheckpointedFunction checkpointed) {
            checkpointed.snapshotState(context);
        }
    }

    @Override
    public void notifyCheckpointComplete(long checkpointId) throws Exception {
        if (processor instanceof CheckpointListener listener) {
            listener.notifyCheckpointComplete(checkpointId);
        }
    }

    @Override
    public void notifyCheckpointAborted(long checkpointId) throws Exception {
        if (processor instanceof CheckpointListener listener) {
            listener.notifyCheckpointAborted(checkpointId);
        }
    }

    @Override
    public void processElement(Event event, Context ctx, Collector<Event> out) throws Exception {
        int failures = 0;
        for (int attempt = 1; ; attempt++) {
            attemptOutput.clear();
            try {
                processor.flatMap(eventSerializer.copy(event), attemptCollector);
                break;
            } catch (EventRejectedException rejection) {
                deadLetter(ctx, event, DeadLetterReason.REJECTED_BY_PROCESSOR,
                        ErrorText.bounded(rejection.getMessage(), MAX_ERROR_CHARS));
                return;
            } catch (Exception failure) {
                if (failure instanceof InterruptedException || Thread.currentThread().isInterrupted()) {
                    throw failure; // the task is being cancelled: not the event's fault
                }
                boolean retriedWithoutLimit = failure instanceof TransientProcessingException;
                if (!retriedWithoutLimit && ++failures == retries.maxAttempts()) {
                    deadLetter(ctx, event, DeadLetterReason.PROCESSOR_FAILED,
                            ErrorText.bounded(failure.getClass().getName()
                                    + (failure.getMessage() == null ? "" : ": " + failure.getMessage()), MAX_ERROR_CHARS)
                                    + " (after " + attempt + " attempts)");
                    warn("The event processor failed on " + describe(event) + " " + attempt
                            + " times; the event goes to the dead-letter topic as PROCESSOR_FAILED", failure);
                    return;
                }
                Duration pause = retries.pauseBeforeRetry(attempt);
                processorRetries.inc();
                warn("The event processor failed on " + describe(event) + " (attempt " + attempt
                        + (retriedWithoutLimit ? ", transient: retried without limit" : " of " + retries.maxAttempts())
                        + "); retrying in " + pause.toMillis() + " ms", failure);
                // Pausing the task thread is deliberate. It keeps the order of the events: a later
                // event (say, of the same account) never overtakes one being retried, as it would if
                // the retry were deferred to a timer. A checkpoint barrier waits behind the event, so
                // every checkpoint holds an event's final outcome, never part of its attempts. And the
                // pause is bounded: the configuration keeps it, and the pauses of a failing event,
                // shorter than checkpoint.timeout.
                Thread.sleep(pause.toMillis());
            }
        }
        if (attemptOutput.isEmpty()) {
            if (processor.emptyOutputMeansFiltered()) {
                filtered(ctx, event);
            }
            return;
        }
        for (Event emitted : attemptOutput) {
            out.collect(emitted);
        }
        attemptOutput.clear();
    }

    /**
     * Records that the processor dropped {@code event}: no value (the input record is found by its
     * coordinates, and a filter record must stay small when most of a stream is filtered), the
     * message id as a header so that a reader of the dead-letter topic sees which id it was.
     */
    private void filtered(Context ctx, Event event) {
        Map<String, byte[]> headers = new HashMap<>(2);
        headers.put(OnceflowHeaders.MESSAGE_ID, event.messageId.getBytes(StandardCharsets.UTF_8));
        DeadLetter record = new DeadLetter(event.sourceKey, null, DeadLetterReason.FILTERED_BY_PROCESSOR,
                FILTERED_ERROR, event.sourceTopic, event.sourcePartition, event.sourceOffset, event.sourceTimestamp,
                headers);
        deadLetters.count(record);
        ctx.output(DEAD_LETTERS, record);
    }

    /** Dead-letters {@code event} as received, with its source record's key (as ingest's dead letters). */
    private void deadLetter(Context ctx, Event event, DeadLetterReason reason, String error) {
        DeadLetter deadLetter = new DeadLetter(event.sourceKey, event.payload, reason, error,
                event.sourceTopic, event.sourcePartition, event.sourceOffset, event.sourceTimestamp, event.headers);
        deadLetters.count(deadLetter);
        ctx.output(DEAD_LETTERS, deadLetter);
    }

    private static String describe(Event event) {
        return "message id '" + ErrorText.bounded(event.messageId, MAX_LOGGED_ID_CHARS) + "' (" + event.sourceTopic
                + "-" + event.sourcePartition + "@" + event.sourceOffset + ")";
    }

    /** Logs at most one warning per {@link #WARNING_INTERVAL_NANOS}, saying how many were left out. */
    private void warn(String message, Exception failure) {
        long now = System.nanoTime();
        if (warned && now - lastWarningNanos < WARNING_INTERVAL_NANOS) {
            warningsLeftOut++;
            return;
        }
        LOG.warn(message + (warningsLeftOut == 0 ? "" : " (" + warningsLeftOut
                + " more such warnings were left out since the last one)"), failure);
        warned = true;
        lastWarningNanos = now;
        warningsLeftOut = 0;
    }
}
