package io.onceflow.ingest;

import io.onceflow.api.Event;

/**
 * What deserialising one Kafka record yields: exactly one of an accepted {@link Event} or a
 * {@link DeadLetter}. Deserialisation never throws; the pipeline splits the two kinds right after
 * the source.
 */
public class IngestResult {
    public Event event;
    public DeadLetter deadLetter;

    public IngestResult() {}

    public static IngestResult accepted(Event event) {
        IngestResult result = new IngestResult();
        result.event = event;
        return result;
    }

    public static IngestResult rejected(DeadLetter deadLetter) {
        IngestResult result = new IngestResult();
        result.deadLetter = deadLetter;
        return result;
    }

    public boolean isAccepted() {
        return event != null;
    }

    @Override
    public String toString() {
        return isAccepted() ? event.toString() : String.valueOf(deadLetter);
    }
}
