package io.onceflow.chaos;

import io.onceflow.api.Event;
import io.onceflow.api.EventProcessor;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.flink.util.Collector;

/**
 * A test processor (packed into the job jar by {@link io.onceflow.testing.cluster.ClusterHarness#jobJarWith})
 * that turns one input record into a failure switch for a multi-process cluster: an event whose JSON
 * carries {@value #FIELD} naming a file fails its task while that file exists, and passes through as
 * any other event once the file is gone. The record stays in the input, so every attempt that restores
 * a checkpoint taken before it replays it and fails again right after its start (after the sink writers,
 * chained behind the processor, claimed their subtasks): a restart storm without a completed
 * checkpoint, which the test ends by deleting the file. Every other event passes unchanged.
 */
public final class FailWhileFileExists implements EventProcessor {
    private static final long serialVersionUID = 1L;
    /** The JSON field of the switch record: the path of the file whose existence fails the task. */
    public static final String FIELD = "failWhileExists";
    private static final Pattern SWITCH = Pattern.compile("\"" + FIELD + "\"\\s*:\\s*\"([^\"]+)\"");

    /** The value of a switch record for {@code file}, with message id {@code id}. */
    public static String switchRecord(String id, Path file) {
        return "{\"id\":\"" + id + "\",\"" + FIELD + "\":\"" + file.toAbsolutePath() + "\"}";
    }

    @Override
    public void flatMap(Event event, Collector<Event> out) {
        Matcher matcher = SWITCH.matcher(new String(event.payload, StandardCharsets.UTF_8));
        if (matcher.find() && Files.exists(Path.of(matcher.group(1)))) {
            throw new SwitchedOn(event.messageId + ": " + matcher.group(1) + " exists");
        }
        out.collect(event);
    }

    /**
     * An Error, so that the job fails the task (it retries and dead-letters a processor's exceptions);
     * its name tells it apart from a real failure in the logs.
     */
    public static final class SwitchedOn extends Error {
        private static final long serialVersionUID = 1L;

        SwitchedOn(String message) {
            super("failure switch on: " + message);
        }
    }
}
