package io.onceflow.testing;

import io.onceflow.api.Event;
import io.onceflow.api.EventProcessor;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.flink.util.Collector;

/**
 * An {@link EventProcessor} that passes events through and, once the job has passed a number of
 * events, runs an action once on its own thread: restarting a database or a broker under a running
 * job, as an operator or a crash would. MiniCluster only (the action is kept in a static registry).
 */
public final class ActionAfterEvents implements EventProcessor {
    private static final long serialVersionUID = 1L;
    private static final Map<String, Runnable> ACTIONS = new ConcurrentHashMap<>();
    private static final Map<String, AtomicBoolean> STARTED = new ConcurrentHashMap<>();
    private static final Map<String, AtomicLong> EVENTS_SEEN = new ConcurrentHashMap<>();

    private final String scenario;
    private final long afterEvents;
    private final long pauseMicrosPerEvent;

    /** @param pauseMicrosPerEvent slows the job so the action lands mid-run rather than after the input drained */
    public ActionAfterEvents(String scenario, long afterEvents, long pauseMicrosPerEvent, Runnable action) {
        this.scenario = scenario;
        this.afterEvents = afterEvents;
        this.pauseMicrosPerEvent = pauseMicrosPerEvent;
        ACTIONS.put(scenario, action);
        STARTED.put(scenario, new AtomicBoolean());
        EVENTS_SEEN.put(scenario, new AtomicLong());
    }

    /** Whether the action of {@code scenario} was started: a test whose action never ran proves nothing. */
    public static boolean started(String scenario) {
        AtomicBoolean started = STARTED.get(scenario);
        return started != null && started.get();
    }

    @Override
    public void flatMap(Event event, Collector<Event> out) throws InterruptedException {
        Thread.sleep(pauseMicrosPerEvent / 1000, (int) (pauseMicrosPerEvent % 1000) * 1000);
        if (EVENTS_SEEN.get(scenario).incrementAndGet() >= afterEvents && STARTED.get(scenario).compareAndSet(false, true)) {
            new Thread(ACTIONS.get(scenario), "chaos-" + scenario).start();
        }
        out.collect(event);
    }
}
