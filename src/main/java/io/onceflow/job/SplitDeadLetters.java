package io.onceflow.job;

import io.onceflow.ingest.DeadLetter;
import io.onceflow.ingest.DeadLetterReason;
import io.onceflow.ingest.Event;
import io.onceflow.ingest.IngestResult;
import java.util.EnumMap;
import java.util.Map;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.streaming.api.functions.ProcessFunction;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;

/** Sends accepted events on and dead letters to a side output, counting both. Internal to the job. */
final class SplitDeadLetters extends ProcessFunction<IngestResult, Event> {
    static final OutputTag<DeadLetter> DEAD_LETTERS = new OutputTag<>("dead-letters") {};

    private static final long serialVersionUID = 1L;

    private transient Counter eventsAccepted;
    private transient Map<DeadLetterReason, Counter> deadLettersByReason;

    @Override
    public void open(OpenContext openContext) {
        MetricGroup metrics = getRuntimeContext().getMetricGroup();
        eventsAccepted = metrics.counter("eventsAccepted");
        deadLettersByReason = new EnumMap<>(DeadLetterReason.class);
        MetricGroup deadLetters = metrics.addGroup("deadLetters");
        for (DeadLetterReason reason : DeadLetterReason.values()) {
            deadLettersByReason.put(reason, deadLetters.counter(reason.name()));
        }
    }

    @Override
    public void processElement(IngestResult result, Context ctx, Collector<Event> out) {
        if (result.isAccepted()) {
            eventsAccepted.inc();
            out.collect(result.event);
        } else {
            deadLettersByReason.get(DeadLetterReason.valueOf(result.deadLetter.reason)).inc();
            ctx.output(DEAD_LETTERS, result.deadLetter);
        }
    }
}
