package io.onceflow.chaos;

import io.onceflow.api.Event;
import io.onceflow.api.EventProcessor;
import java.nio.file.Files;
import java.nio.file.Path;
import org.apache.flink.api.common.functions.AbstractRichFunction;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.util.Collector;

/**
 * A test processor (packed into the job jar by {@link io.onceflow.testing.cluster.ClusterHarness#jobJarWith})
 * that is a failure switch for a multi-process cluster: while the file that the TaskManagers' system
 * property {@value #PROPERTY} names exists, a running task fails on its next event and every new attempt
 * fails in {@code open}. Flink opens a chain's operators from its tail, so the sink writers chained
 * behind the processor have claimed their subtasks by then; and a task that fails in {@code open} never
 * runs, so no checkpoint completes: a restart storm from one checkpoint, which the test ends by deleting
 * the file. Events pass unchanged.
 */
public final class FailWhileFileExists extends AbstractRichFunction implements EventProcessor {
    private static final long serialVersionUID = 1L;
    /** The TaskManagers' system property naming the switch file. */
    public static final String PROPERTY = "onceflow.test.failure-switch";

    /** The TaskManagers' JVM option that makes {@code file} the switch. */
    public static String jvmOption(Path file) {
        return "-D" + PROPERTY + "=" + file.toAbsolutePath();
    }

    @Override
    public void open(OpenContext openContext) {
        failIfSwitchedOn("in open, attempt " + getRuntimeContext().getTaskInfo().getAttemptNumber());
    }

    /** Also fails a running task, so that creating the file starts the storm at once (events keep coming). */
    @Override
    public void flatMap(Event event, Collector<Event> out) {
        failIfSwitchedOn("on event " + event.messageId);
        out.collect(event);
    }

    private static void failIfSwitchedOn(String where) {
        String file = System.getProperty(PROPERTY);
        if (file != null && Files.exists(Path.of(file))) {
            throw new SwitchedOn(file + " exists (" + where + ")");
        }
    }

    /**
     * An Error, as a crash would be; its name tells it apart from a real failure in the logs.
     */
    public static final class SwitchedOn extends Error {
        private static final long serialVersionUID = 1L;

        SwitchedOn(String message) {
            super("failure switch on: " + message);
        }
    }
}
