package io.onceflow.sink.postgres.internal;

import io.onceflow.api.Event;
import java.nio.file.Path;
import org.apache.flink.metrics.SimpleCounter;

/**
 * Another process's writer, for {@link HeldEventsTest}: spills one event into the directory given as
 * its argument, says {@code holding}, and holds it until its standard input closes or it is killed.
 */
public final class SpillHolder {
    public static void main(String[] args) throws Exception {
        try (HeldEvents held = new HeldEvents(Path.of(args[0]), "other-s0", 0, new SimpleCounter())) {
            Event event = new Event();
            event.messageId = "held-elsewhere";
            held.add(event);
            System.out.println("holding");
            System.out.flush();
            while (System.in.read() != -1) {
                // until stdin closes
            }
        }
    }
}
