package io.onceflow.testing;

import io.onceflow.api.Event;
import io.onceflow.api.EventProcessor;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.flink.api.common.state.CheckpointListener;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.util.Collector;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * An {@link EventProcessor} that passes events through (or to a processor under test) and fails
 * the task once, at a chosen point of the checkpoint protocol, after a number of events went through
 * the job. It stands where a user's business logic would, chained with the sinks, so its failure
 * takes the sinks' open transactions down with it. Works in one JVM (MiniCluster): the "fired" flag
 * and the event count are static, per scenario, so that the restarted attempt does not fail again.
 */
public final class FailureInjector implements EventProcessor, CheckpointedFunction, CheckpointListener {
    private static final long serialVersionUID = 1L;
    private static final Logger LOG = LoggerFactory.getLogger(FailureInjector.class);

    /** Where in the checkpoint protocol the failure happens. */
    public enum Moment {
        /** Before this subtask took its first snapshot: nothing has been committed yet. */
        BEFORE_FIRST_CHECKPOINT,
        /**
         * After a snapshot (the sinks pre-committed) and before that checkpoint's completion notice, once
         * an earlier checkpoint has completed: so there is committed output, pending output, and a
         * retained checkpoint to resume from (on a loaded machine the first checkpoint's snapshot can
         * come before the threshold is reached, and a crash then leaves no checkpoint at all).
         */
        AFTER_SNAPSHOT_BEFORE_COMPLETION,
        /** After a checkpoint's completion notice (its transactions are being or have been committed). */
        AFTER_COMPLETION
    }

    /**
     * The pace once the threshold is passed and the moment has not come yet: slow enough that the
     * bounded input cannot drain before the next checkpoints. The number of checkpoints in a run is
     * also bounded by the records in flight ahead of each barrier, which {@link MiniClusters} keeps
     * small: with Flink's 32 KB buffers a 4,000-record run had two or three checkpoints, and CI runs
     * on a loaded machine missed AFTER_SNAPSHOT_BEFORE_COMPLETION; with 4 KB buffers it has about ten.
     */
    private static final long WAITING_FOR_MOMENT_MICROS_PER_EVENT = 5_000;

    private static final Map<String, AtomicBoolean> FIRED = new ConcurrentHashMap<>();
    private static final Map<String, AtomicBoolean> RESTARTED = new ConcurrentHashMap<>();
    private static final Map<String, AtomicLong> EVENTS_SEEN = new ConcurrentHashMap<>();
    private static final Map<String, AtomicLong> COMPLETED_WHEN_FIRED = new ConcurrentHashMap<>();

    private final String scenario;
    private final Moment moment;
    private final long afterEvents;
    private long pauseMicrosPerEvent;
    private EventProcessor next = EventProcessor.passThrough();

    private transient long lastSnapshot;
    private transient long lastCompleted;
    private transient long eventsSinceSnapshot;
    private transient long eventsSinceCompletion;

    /**
     * @param scenario a name unique to the test run, keying the static flags
     * @param afterEvents how many events the whole job must have passed before the failure
     */
    public FailureInjector(String scenario, Moment moment, long afterEvents) {
        this.scenario = scenario;
        this.moment = moment;
        this.afterEvents = afterEvents;
        FIRED.put(scenario, new AtomicBoolean());
        RESTARTED.put(scenario, new AtomicBoolean());
        EVENTS_SEEN.put(scenario, new AtomicLong());
        COMPLETED_WHEN_FIRED.put(scenario, new AtomicLong());
    }

    /**
     * Fails at {@code moment} about a third into a run over {@code records} records (early enough
     * before the first checkpoint), paced so that the run spans several checkpoints.
     */
    public static FailureInjector midRun(String scenario, Moment moment, long records) {
        return new FailureInjector(scenario, moment, moment == Moment.BEFORE_FIRST_CHECKPOINT ? 50 : records / 3)
                .pacedAt(500);
    }

    /**
     * Slows each subtask down so that a small input spans several checkpoints: without it the
     * input drains between two checkpoints and "after a completed checkpoint" never comes.
     */
    public FailureInjector pacedAt(long microsPerEvent) {
        this.pauseMicrosPerEvent = microsPerEvent;
        return this;
    }

    /**
     * Hands each event, once counted and not failed, to {@code processor} (a plain function: it gets
     * no open, close or checkpoint calls) instead of passing it through.
     */
    public FailureInjector then(EventProcessor processor) {
        this.next = processor;
        return this;
    }

    /** Whether the failure of {@code scenario} happened: a test whose failure never fired proves nothing. */
    public static boolean fired(String scenario) {
        AtomicBoolean fired = FIRED.get(scenario);
        return fired != null && fired.get();
    }

    @Override
    public boolean emptyOutputMeansFiltered() {
        return next.emptyOutputMeansFiltered();
    }

    @Override
    public void flatMap(Event event, Collector<Event> out) throws Exception {
        long seen = EVENTS_SEEN.get(scenario).incrementAndGet();
        eventsSinceSnapshot++;
        eventsSinceCompletion++;
        boolean due = seen >= afterEvents && !FIRED.get(scenario).get();
        if (due && atMoment() && FIRED.get(scenario).compareAndSet(false, true)) {
            COMPLETED_WHEN_FIRED.get(scenario).set(lastCompleted);
            // before the failure, so that this line comes first, not the errors it causes
            LOG.warn("Injecting a failure now ({} after {} events; last snapshot {}, last completed {}): the job"
                    + " restarts from its last completed checkpoint. Kafka's committer may then log"
                    + " ProducerFencedException errors saying 'most likely signals data loss' for transactions that"
                    + " were already committed: expected here; the audit is the judge.", moment, seen, lastSnapshot,
                    lastCompleted);
            throw new InjectedFailure(moment + " after " + seen + " events (last snapshot " + lastSnapshot
                    + ", last completed " + lastCompleted + ")");
        }
        pause(due ? Math.max(pauseMicrosPerEvent, WAITING_FOR_MOMENT_MICROS_PER_EVENT) : pauseMicrosPerEvent);
        next.flatMap(event, out);
    }

    private static void pause(long micros) throws InterruptedException {
        if (micros > 0) {
            Thread.sleep(micros / 1000, (int) (micros % 1000) * 1000);
        }
    }

    private boolean atMoment() {
        switch (moment) {
            case BEFORE_FIRST_CHECKPOINT:
                return lastSnapshot == 0;
            case AFTER_SNAPSHOT_BEFORE_COMPLETION:
                return lastCompleted > 0 && lastSnapshot > lastCompleted && eventsSinceSnapshot > 0;
            case AFTER_COMPLETION:
                return lastCompleted > 0 && lastCompleted == lastSnapshot && eventsSinceCompletion > 0;
            default:
                throw new IllegalStateException("unknown moment " + moment);
        }
    }

    @Override
    public void snapshotState(FunctionSnapshotContext context) {
        lastSnapshot = context.getCheckpointId();
        eventsSinceSnapshot = 0;
    }

    /**
     * The last checkpoint the failing subtask saw complete when it failed: with
     * {@link Moment#AFTER_COMPLETION}, the checkpoint the job restores.
     */
    public static long lastCompletedWhenFired(String scenario) {
        return COMPLETED_WHEN_FIRED.get(scenario).get();
    }

    /**
     * Whether the job of {@code scenario} started again after the failure: the failure took the task
     * down (rather than being caught on the way, say by a retry) and the job recovered from it.
     */
    public static boolean restartedAfterFiring(String scenario) {
        AtomicBoolean restarted = RESTARTED.get(scenario);
        return restarted != null && restarted.get();
    }

    @Override
    public void initializeState(FunctionInitializationContext context) {
        if (FIRED.get(scenario).get()) {
            RESTARTED.get(scenario).set(true);
        }
    }

    @Override
    public void notifyCheckpointComplete(long checkpointId) {
        lastCompleted = Math.max(lastCompleted, checkpointId);
        eventsSinceCompletion = 0;
    }

    /**
     * The injected failure; its type makes it easy to tell apart from a real one in logs. An Error,
     * as a crash would be: the job retries and dead-letters a processor's exceptions, but an Error
     * fails the task.
     */
    public static final class InjectedFailure extends Error {
        private static final long serialVersionUID = 1L;

        InjectedFailure(String message) {
            super("injected failure: " + message);
        }
    }
}
