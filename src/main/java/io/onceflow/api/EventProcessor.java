package io.onceflow.api;

import org.apache.flink.api.common.functions.FlatMapFunction;
import org.apache.flink.util.Collector;

/**
 * The place for a team's own business logic: it sees each event once, after deduplication and
 * before the sinks, and emits zero or more events. Whatever it emits is written exactly once to
 * Kafka and PostgreSQL with the rest of the checkpoint.
 *
 * <p>Rules that keep the guarantee: be deterministic in the event (a replay after a failure must
 * produce the same output); keep the emitted {@link Event#messageId} stable and unique per output
 * (it is the key of the output record and the primary key of the row; derive new ids from the input
 * id, e.g. {@code id + ":refund"}, never at random); side effects outside Kafka and PostgreSQL (an
 * HTTP call) are at-least-once and need an idempotency key.
 *
 * <p>No event can stop the job. Throw {@link EventRejectedException} to reject an event: it goes to
 * the dead-letter topic as {@code REJECTED_BY_PROCESSOR}, never retried. Any other exception is
 * retried in place ({@code processor.max.attempts}, with a doubling pause), then the event is
 * dead-lettered as {@code PROCESSOR_FAILED}; a {@link TransientProcessingException} is retried
 * without limit. Emit nothing (return normally) to drop an event on purpose: it is filtered, and
 * recorded as such in the dead-letter topic ({@code FILTERED_BY_PROCESSOR}, the source key and
 * coordinates, no value), so that the audit counts it as an outcome, not a loss. An attempt that
 * throws has its output discarded, and each attempt gets its own copy
 * of the event, so changing the event given is fine; do not change an event after emitting it, as
 * output is forwarded only once {@code flatMap} returns.
 *
 * <p>Plug it in with the {@code processor.class} setting or a main method of your own
 * that calls {@code Onceflow.run(args, processor)}. Implementations may also implement {@link
 * org.apache.flink.api.common.functions.RichFunction}, {@link
 * org.apache.flink.streaming.api.checkpoint.CheckpointedFunction} (operator state; the stream is not
 * keyed) or {@link org.apache.flink.api.common.state.CheckpointListener}, as any Flink function
 * can.
 */
@FunctionalInterface
public interface EventProcessor extends FlatMapFunction<Event, Event> {

    /**
     * Whether an event for which {@code flatMap} returns having emitted nothing is filtered: recorded
     * in the dead-letter topic as {@code FILTERED_BY_PROCESSOR} (no value, the source coordinates),
     * so that the audit counts it as an outcome rather than a loss. True by default.
     *
     * <p>Return false if this processor holds events in its state and emits them later, while
     * processing another event: their ids would otherwise be recorded as filtered and then output.
     * Nothing is then recorded for an event it drops, and the audit reports such an event as lost.
     */
    default boolean emptyOutputMeansFiltered() {
        return true;
    }

    /** The default: every event passes unchanged. */
    static EventProcessor passThrough() {
        return new PassThrough();
    }

    /** A named class rather than a lambda so its serialised form stays stable across builds. */
    final class PassThrough implements EventProcessor {
        private static final long serialVersionUID = 1L;

        @Override
        public void flatMap(Event event, Collector<Event> out) {
            out.collect(event);
        }
    }
}
