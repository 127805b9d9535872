package io.onceflow.job;

import io.onceflow.api.Event;
import io.onceflow.ingest.DeadLetter;
import io.onceflow.ingest.IngestResult;
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
    private transient DeadLetterCounters deadLetters;

    @Override
    public void open(OpenContext openContext) {
        MetricGroup metrics = getRuntimeContext().getMetricGroup();
        eventsAccepted = metrics.counter("eventsAccepted");
        deadLetters = new DeadLetterCounters(metrics, reason -> !reason.fromProcessor());
    }

    @Override
    public void processElement(IngestResult result, Context ctx, Collector<Event> out) {
        if (result.isAccepted()) {
            eventsAccepted.inc();
            out.collect(result.event);
        } else {
            deadLetters.count(result.deadLetter);
            ctx.output(DEAD_LETTERS, result.deadLetter);
        }
    }
}
