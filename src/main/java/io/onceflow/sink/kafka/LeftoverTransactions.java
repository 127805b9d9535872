package io.onceflow.sink.kafka;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeoutException;
import java.util.function.Predicate;
import java.util.stream.Collectors;
import org.apache.flink.connector.kafka.sink.KafkaCommittable;
import org.apache.flink.connector.kafka.sink.KafkaWriterState;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.connector.sink2.CommittableMessage;
import org.apache.flink.streaming.api.functions.ProcessFunction;
import org.apache.flink.util.Collector;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Aborts the Kafka transactions that earlier, dead attempts of a sink left open. Each writer attempt
 * writes under its own tag ({@link AttemptTags}), so no attempt's start fences another's: the
 * transaction of a successor that restored the same checkpoint, pre-committed for a completed
 * checkpoint and not committed yet, was lost when a zombie paused in its writer's start woke up and
 * initialised the same name. Two rules end what dead attempts left open instead.
 *
 * <ul>
 *   <li><b>At a restore</b> ({@link #abortOfRestoredAttempts}): the open transactions named after
 *       the restored checkpoint {@code N} of the attempts whose state it restores. Those attempts
 *       are superseded; every other attempt that restored {@code N} writes under a tag of its own.
 *   <li><b>Once this attempt's first checkpoint {@code c1} completed</b> (this function, after the
 *       sink's committer): the open transactions of its subtask class named {@code n} with {@code
 *       N < n <= c1}, whatever their tag: attempts killed before a checkpoint of theirs completed. No
 *       live attempt has such a name: a later one restores {@code c1} or later and names after it; an
 *       earlier one saw only barriers below {@code c1}, which the job's checkpoint counter numbers
 *       in order; this attempt's own transactions up to {@code c1} are committed before the committer
 *       passes the checkpoint on; and a zombie that gets this far had its own {@code c1} complete
 *       while it was live, below every later attempt's names.
 * </ul>
 *
 * <p>The second runs on a thread of its own, with a growing pause after a failure: listing the
 * cluster's transactions waits for every broker, and the sink's task must not.
 */
final class LeftoverTransactions extends ProcessFunction<CommittableMessage<KafkaCommittable>, Void>
        implements CheckpointedFunction {
    private static final long serialVersionUID = 1L;
    private static final Logger LOG = LoggerFactory.getLogger(LeftoverTransactions.class);
    private static final long FIRST_PAUSE_MS = 10_000;
    private static final long LONGEST_PAUSE_MS = 300_000;

    private final String bootstrapServers;
    private final Properties clientProperties;
    private final String sinkPrefix;

    private transient long restoredCheckpoint;
    private transient long firstBarrier;
    private transient ExecutorService thread;
    private transient Future<?> running;
    private transient volatile boolean done;
    private transient volatile long notBefore;
    private transient volatile long pause;

    /** @param clientProperties pass-through client settings (security.protocol, sasl.*, ssl.*) */
    LeftoverTransactions(String bootstrapServers, Properties clientProperties, String sinkPrefix) {
        this.bootstrapServers = bootstrapServers;
        this.clientProperties = clientProperties;
        this.sinkPrefix = sinkPrefix;
    }

    /**
     * Aborts the open transactions that the attempts whose writer state is restored left after the
     * restored checkpoint: for each state its tag and subtask, names after {@code restoredCheckpoint}.
     * The connector itself probes only the first state's prefix, so after a rescale the others'
     * would stay open.
     */
    static void abortOfRestoredAttempts(String bootstrapServers, Properties clientProperties, String sinkPrefix,
            Collection<KafkaWriterState> restored, long restoredCheckpoint) throws ExecutionException, TimeoutException {
        Set<String> attempts = restored.stream()
                .flatMap(state -> TransactionName.tagOf(sinkPrefix, state.getTransactionalIdPrefix())
                        .map(tag -> tag + "/" + state.getOwnedSubtaskId()).stream())
                .collect(Collectors.toSet());
        if (attempts.isEmpty()) {
            return;
        }
        List<String> open = abortOpen(bootstrapServers, clientProperties, sinkPrefix,
                name -> name.checkpoint() > restoredCheckpoint && attempts.contains(name.tag() + "/" + name.subtask()));
        if (!open.isEmpty()) {
            LOG.info("Kafka sink '{}': aborted {} transaction(s) that the restored attempts left open after checkpoint"
                    + " {}: {}", sinkPrefix, open.size(), restoredCheckpoint, open);
        }
    }

    /** Aborts the sink's open transactions whose names {@code which} accepts; returns their ids. */
    private static List<String> abortOpen(String bootstrapServers, Properties clientProperties, String sinkPrefix,
            Predicate<TransactionName> which) throws ExecutionException, TimeoutException {
        List<String> open = new ArrayList<>();
        for (String id : PendingKafkaTransactions.ongoing(bootstrapServers, clientProperties, sinkPrefix)) {
            TransactionName.parse(sinkPrefix, id).filter(which).ifPresent(name -> open.add(id));
        }
        PendingKafkaTransactions.abort(bootstrapServers, clientProperties, open);
        return open;
    }

    @Override
    public void initializeState(FunctionInitializationContext context) {
        restoredCheckpoint = context.getRestoredCheckpointId().orElse(0);
        firstBarrier = -1;
    }

    @Override
    public void snapshotState(FunctionSnapshotContext context) {
        if (firstBarrier < 0) {
            firstBarrier = context.getCheckpointId();
        }
    }

    @Override
    public void processElement(CommittableMessage<KafkaCommittable> committed, Context context, Collector<Void> out) {
        if (done || firstBarrier < 0 || committed.getCheckpointIdOrEOI() < firstBarrier
                || (running != null && !running.isDone()) || System.currentTimeMillis() < notBefore) {
            return;
        }
        if (thread == null) {
            thread = Executors.newSingleThreadExecutor(task -> {
                Thread daemon = new Thread(task, "onceflow-kafka-leftovers-" + sinkPrefix);
                daemon.setDaemon(true);
                return daemon;
            });
        }
        int subtask = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
        int parallelism = getRuntimeContext().getTaskInfo().getNumberOfParallelSubtasks();
        long after = restoredCheckpoint;
        long upTo = firstBarrier;
        running = thread.submit(() -> abortOfDeadAttempts(subtask, parallelism, after, upTo));
    }

    private void abortOfDeadAttempts(int subtask, int parallelism, long after, long upTo) {
        try {
            List<String> open = abortOpen(bootstrapServers, clientProperties, sinkPrefix,
                    name -> name.subtask() % parallelism == subtask && name.checkpoint() > after
                            && name.checkpoint() <= upTo);
            done = true;
            if (!open.isEmpty()) {
                LOG.info("Kafka sink '{}' subtask {}: aborted {} transaction(s) that earlier attempts left open after"
                        + " checkpoint {} (this attempt's first checkpoint {} has completed): {}", sinkPrefix, subtask,
                        open.size(), after, upTo, open);
            }
        } catch (Exception e) {
            // they only hold back read_committed consumers until the transaction timeout
            pause = pause == 0 ? FIRST_PAUSE_MS : Math.min(2 * pause, LONGEST_PAUSE_MS);
            notBefore = System.currentTimeMillis() + pause;
            LOG.warn("Kafka sink '{}' subtask {}: could not abort the transactions earlier attempts left open ({});"
                    + " trying again at a completed checkpoint in {} s", sinkPrefix, subtask, e.toString(), pause / 1000);
        }
    }

    @Override
    public void close() throws Exception {
        if (thread != null) {
            thread.shutdownNow();
        }
        super.close();
    }
}
