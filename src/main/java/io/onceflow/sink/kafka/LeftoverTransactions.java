package io.onceflow.sink.kafka;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.Properties;
import org.apache.flink.connector.kafka.sink.KafkaCommittable;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.connector.sink2.CommittableMessage;
import org.apache.flink.streaming.api.functions.ProcessFunction;
import org.apache.flink.util.Collector;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Aborts the Kafka transactions that earlier, dead attempts of a sink left open, once this attempt has
 * proved it is the live one. Runs after the sink's committer, on the committables it committed.
 *
 * <p>Each writer attempt writes under its own tag ({@link AttemptTags}), so an attempt's start aborts
 * only what the restored checkpoint's own attempt left (the connector probes that attempt's ids after
 * the checkpoint): it can never fence the transaction of another attempt that restored the same
 * checkpoint and may be the live one (a TaskManager paused in its writer's start and woken after its
 * successor pre-committed a completed checkpoint's transaction, which the connector's committer then
 * drops). What other dead attempts left open (killed before their first checkpoint) would hold back
 * {@code read_committed} consumers until the transaction timeout; this function aborts it.
 *
 * <p>The rule: once checkpoint {@code c1}, this attempt's first barrier, has completed, no other live
 * attempt has a transaction named {@code n} with {@code restored < n <= c1}. Every later attempt
 * restores {@code c1} or later and names its transactions after it; every earlier attempt's barriers
 * precede {@code c1}, so its transactions are named at most {@code c1}; and this attempt's own
 * transactions in that range belong to checkpoints up to {@code c1}, committed before the committer
 * passes them on. A zombie that reaches this point itself had its {@code c1} completed while it was
 * live, so every later attempt's names lie above its range.
 */
final class LeftoverTransactions extends ProcessFunction<CommittableMessage<KafkaCommittable>, Void>
        implements CheckpointedFunction {
    private static final long serialVersionUID = 1L;
    private static final Logger LOG = LoggerFactory.getLogger(LeftoverTransactions.class);

    private final String bootstrapServers;
    private final Properties clientProperties;
    private final String sinkPrefix;

    private transient long restoredCheckpoint;
    private transient long firstBarrier;
    private transient boolean done;

    /** @param clientProperties pass-through client settings (security.protocol, sasl.*, ssl.*) */
    LeftoverTransactions(String bootstrapServers, Properties clientProperties, String sinkPrefix) {
        this.bootstrapServers = bootstrapServers;
        this.clientProperties = clientProperties;
        this.sinkPrefix = sinkPrefix;
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
        if (done || firstBarrier < 0 || committed.getCheckpointIdOrEOI() < firstBarrier) {
            return;
        }
        int subtask = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
        int parallelism = getRuntimeContext().getTaskInfo().getNumberOfParallelSubtasks();
        try {
            List<String> aborted = new ArrayList<>();
            for (String id : PendingKafkaTransactions.ongoing(bootstrapServers, clientProperties, sinkPrefix)) {
                Optional<TransactionName> name = TransactionName.parse(sinkPrefix, id);
                if (name.isPresent() && name.get().subtask() % parallelism == subtask
                        && name.get().checkpoint() > restoredCheckpoint && name.get().checkpoint() <= firstBarrier) {
                    aborted.add(id);
                }
            }
            PendingKafkaTransactions.abort(bootstrapServers, clientProperties, aborted);
            done = true;
            if (!aborted.isEmpty()) {
                LOG.info("Kafka sink '{}' subtask {}: aborted {} transaction(s) that earlier attempts left open after"
                        + " checkpoint {} (this attempt's first checkpoint {} has completed): {}", sinkPrefix, subtask,
                        aborted.size(), restoredCheckpoint, firstBarrier, aborted);
            }
        } catch (Exception e) {
            // they only hold back read_committed consumers until the transaction timeout: try again
            // at the next completed checkpoint rather than fail the job
            LOG.warn("Kafka sink '{}' subtask {}: could not abort the transactions earlier attempts left open ({});"
                    + " trying again at the next completed checkpoint", sinkPrefix, subtask, e.toString());
        }
    }

    /**
     * A transactional id of a sink: {@code <sink prefix>-<tag>-<subtask>-<n>}, or without the tag
     * as written before tags; {@code n} is the checkpoint after which the transaction opened, plus one.
     */
    record TransactionName(String tag, int subtask, long checkpoint) {
        static Optional<TransactionName> parse(String sinkPrefix, String transactionalId) {
            if (!transactionalId.startsWith(sinkPrefix + "-")) {
                return Optional.empty();
            }
            String[] parts = transactionalId.substring(sinkPrefix.length() + 1).split("-", -1);
            if (parts.length < 2 || parts.length > 3 || (parts.length == 3 && !AttemptTags.isTag(parts[0]))) {
                return Optional.empty();
            }
            try {
                return Optional.of(new TransactionName(parts.length == 3 ? parts[0] : "",
                        Integer.parseInt(parts[parts.length - 2]), Long.parseLong(parts[parts.length - 1])));
            } catch (NumberFormatException e) {
                return Optional.empty();
            }
        }
    }
}
