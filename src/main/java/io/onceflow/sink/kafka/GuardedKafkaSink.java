package io.onceflow.sink.kafka;

import java.io.IOException;
import java.util.Collection;
import java.util.List;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeoutException;
import javax.annotation.Nullable;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.sink2.InitContext;
import org.apache.flink.annotation.Internal;
import org.apache.flink.api.common.eventtime.Watermark;
import org.apache.flink.api.connector.sink2.Committer;
import org.apache.flink.api.connector.sink2.CommitterInitContext;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.connector.kafka.sink.KafkaCommittable;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.sink.KafkaWriterState;
import org.apache.flink.connector.kafka.sink.TwoPhaseCommittingStatefulSink;
import org.apache.flink.core.io.SimpleVersionedSerializer;
import org.apache.flink.metrics.Counter;
import org.apache.flink.streaming.api.connector.sink2.CommittableMessage;
import org.apache.flink.streaming.api.connector.sink2.SupportsPostCommitTopology;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.lineage.LineageVertex;
import org.apache.flink.streaming.api.lineage.LineageVertexProvider;
import org.apache.flink.util.ExceptionUtils;
import org.apache.flink.util.function.SerializableFunction;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Internal. Flink's {@link KafkaSink} with three guards the connector lacks; everything else (writer
 * state, committables, committer, the post-commit topology that co-locates writer and committer,
 * lineage) is the delegate's, through the same interfaces, so Flink builds the same operators.
 *
 * <h2>Transactional ids of one attempt only</h2>
 *
 * <p>With exactly-once, each writer attempt and its committer use a connector sink of their own
 * whose prefix ends in the attempt's random tag ({@link AttemptTags}):
 * {@code <sink prefix>-<tag>-<subtask>-<n>}. The connector names an attempt's first transaction
 * after the restored checkpoint, so two attempts that restored the same checkpoint shared its name,
 * and the one that started last fenced the other's; when the other was the live one, a transaction
 * of a completed checkpoint was lost. With tags no attempt touches another's transactions at its
 * start; what dead attempts left open is aborted by {@link LeftoverTransactions}, a post-commit
 * step, once this attempt's first checkpoint has completed.
 *
 * <h2>A gate before the first producer</h2>
 *
 * <p>Each writer attempt passes a {@link KafkaWriterGate} before the connector creates its first
 * producer. A restoring {@code KafkaWriter} initialises the transactional ids after the restored
 * checkpoint to abort what its previous attempt left open, and in doing so fences any producer that
 * uses those ids now. When another job took over the prefixes (a newer run of the sink prefix,
 * registered while this job was between restarts), that is the newer job's producer, and its open
 * transaction is aborted. The connector has no hook before that step, so the check runs here.
 *
 * <h2>A fenced writer's close</h2>
 *
 * <p>Writers survive being closed after a newer attempt fenced their producer. Why: a TaskManager frozen past the heartbeat timeout (GC, VM freeze, SIGSTOP) with sends in
 * flight wakes up after the job recovered elsewhere, where the successor's recovery bumped the
 * epoch of the same transactional ids. The woken task fails, and Flink cleans it up in {@code
 * Task.doRun}'s failure handler: {@code Task.restoreAndInvoke}'s cleanup, {@code StreamTask.cleanUp},
 * {@code closeAllOperators}, {@code SinkWriterOperator.close}, {@code ExactlyOnceKafkaWriter.close}
 * and {@code KafkaWriter.close()}, which in flink-connector-kafka 5.0.0-2.2 rethrows the send that
 * failed while the task was frozen ({@code checkAsyncException}: "One or more Kafka Producer send
 * requests have encountered exception", caused by an {@code InvalidProducerEpochException}). An
 * exception in that handler is "FATAL - exception in exception handler": the whole TaskManager
 * exits (stack trace seen in {@code WokenTaskManagerIT}; docs/failover.md, "What a woken
 * zombie logs"). {@code ExactlyOnceKafkaWriter.abortCurrentProducer()} likewise catches a {@code
 * ProducerFencedException} but not an {@code InvalidProducerEpochException}. No upstream ticket
 * covers it (FLINK-31305 and FLINK-35749 changed how {@code checkAsyncException} surfaces send
 * errors, not the close during cleanup): check again before upgrading the connector.
 *
 * <p>Containing it loses nothing: a fenced producer's open transaction is aborted by its
 * successor, whose restored checkpoint replays those records, and the committables of completed
 * checkpoints are the committer's, not the writer's. Only fencing errors are contained, and only
 * in {@code close()}: anywhere else they fail the task as before.
 */
@Internal
public final class GuardedKafkaSink<IN>
        implements TwoPhaseCommittingStatefulSink<IN, KafkaWriterState, KafkaCommittable>,
                SupportsPostCommitTopology<KafkaCommittable>, LineageVertexProvider {
    private static final long serialVersionUID = 1L;
    /** The writer's counter of fenced closes it contained. */
    public static final String FENCED_CLOSES_METRIC = "fencedWriterCloses";

    private final KafkaSink<IN> delegate;
    private final @Nullable SerializableFunction<String, KafkaSink<IN>> withPrefix;
    private final String name;
    private final KafkaWriterGate gate;
    private final Properties clientProperties;
    private final String bootstrapServers;

    /**
     * @param delegate the connector's sink with the sink prefix {@code name}
     * @param withPrefix the same sink with another prefix: for each exactly-once attempt; null for
     *     at-least-once, which has no transactions
     * @param name the sink's transactional id prefix
     * @param gate what each writer attempt passes before the delegate creates a producer
     * @param clientProperties pass-through client settings, for aborting dead attempts' transactions
     */
    GuardedKafkaSink(KafkaSink<IN> delegate, @Nullable SerializableFunction<String, KafkaSink<IN>> withPrefix,
            String name, KafkaWriterGate gate, String bootstrapServers, Properties clientProperties) {
        this.delegate = delegate;
        this.withPrefix = withPrefix;
        this.name = name;
        this.gate = gate;
        this.bootstrapServers = bootstrapServers;
        this.clientProperties = clientProperties;
    }

    @Override
    public PrecommittingStatefulSinkWriter<IN, KafkaWriterState, KafkaCommittable> createWriter(
            WriterInitContext context) throws IOException {
        return restoreWriter(context, List.of());
    }

    @Override
    public PrecommittingStatefulSinkWriter<IN, KafkaWriterState, KafkaCommittable> restoreWriter(
            WriterInitContext context, Collection<KafkaWriterState> recoveredState) throws IOException {
        gate.beforeProducersStart();
        if (withPrefix == null) {
            return new Writer<>(delegate.restoreWriter(context, recoveredState), context, name, () -> {});
        }
        if (!recoveredState.isEmpty()) {
            try {
                LeftoverTransactions.abortOfRestoredAttempts(bootstrapServers, clientProperties, name, recoveredState,
                        context.getRestoredCheckpointId().orElse(0));
            } catch (ExecutionException | TimeoutException e) {
                throw new IOException("could not list the Kafka transactions of '" + name + "' that the restored"
                        + " attempts left open", e);
            }
        }
        String tag = AttemptTags.take(context, name);
        return new Writer<>(withPrefix.apply(name + "-" + tag).restoreWriter(context, recoveredState), context, name,
                () -> AttemptTags.release(context, name, tag));
    }

    @Override
    public SimpleVersionedSerializer<KafkaWriterState> getWriterStateSerializer() {
        return delegate.getWriterStateSerializer();
    }

    @Override
    public Committer<KafkaCommittable> createCommitter(CommitterInitContext context) throws IOException {
        if (withPrefix == null) {
            return delegate.createCommitter(context);
        }
        String tag = AttemptTags.take(context, name);
        Committer<KafkaCommittable> committer = withPrefix.apply(name + "-" + tag).createCommitter(context);
        return new Committer<>() {
            @Override
            public void commit(Collection<CommitRequest<KafkaCommittable>> requests)
                    throws IOException, InterruptedException {
                committer.commit(requests);
            }

            @Override
            public void close() throws Exception {
                try {
                    committer.close();
                } finally {
                    AttemptTags.release(context, name, tag);
                }
            }
        };
    }

    @Override
    public SimpleVersionedSerializer<KafkaCommittable> getCommittableSerializer() {
        return delegate.getCommittableSerializer();
    }

    @Override
    public void addPostCommitTopology(DataStream<CommittableMessage<KafkaCommittable>> committables) {
        delegate.addPostCommitTopology(committables);
        if (withPrefix != null) {
            SingleOutputStreamOperator<Void> leftovers = committables
                    .process(new LeftoverTransactions(bootstrapServers, clientProperties, name), Types.VOID)
                    .uid(name + "-leftover-transactions")
                    .name("Abort leftover transactions");
            // beside its committer, whose committed checkpoints it follows
            leftovers.getTransformation().setCoLocationGroupKey(name);
        }
    }

    @Override
    public LineageVertex getLineageVertex() {
        return delegate.getLineageVertex();
    }

    /** The fencing error in {@code failure}'s causes, if it has one. */
    static Optional<Throwable> fencingError(Throwable failure) {
        Optional<? extends Throwable> fenced = ExceptionUtils.findThrowable(failure, ProducerFencedException.class);
        return fenced.isPresent() ? Optional.of(fenced.get())
                : ExceptionUtils.findThrowable(failure, InvalidProducerEpochException.class).map(e -> e);
    }

    /** Delegates every call; only {@code close()} contains a fencing error. */
    private static final class Writer<IN> implements PrecommittingStatefulSinkWriter<IN, KafkaWriterState, KafkaCommittable> {
        private static final Logger LOG = LoggerFactory.getLogger(GuardedKafkaSink.class);

        private final PrecommittingStatefulSinkWriter<IN, KafkaWriterState, KafkaCommittable> delegate;
        private final Counter fencedCloses;
        private final String description;
        private final Runnable releaseTag;

        Writer(PrecommittingStatefulSinkWriter<IN, KafkaWriterState, KafkaCommittable> delegate,
                WriterInitContext context, String name, Runnable releaseTag) {
            this.delegate = delegate;
            this.releaseTag = releaseTag;
            this.fencedCloses = context.metricGroup().counter(FENCED_CLOSES_METRIC);
            this.description = "Kafka sink '" + name + "' subtask " + context.getTaskInfo().getIndexOfThisSubtask()
                    + " attempt " + context.getTaskInfo().getAttemptNumber();
        }

        @Override
        public void write(IN element, Context context) throws IOException, InterruptedException {
            delegate.write(element, context);
        }

        @Override
        public void writeWatermark(Watermark watermark) throws IOException, InterruptedException {
            delegate.writeWatermark(watermark);
        }

        @Override
        public void flush(boolean endOfInput) throws IOException, InterruptedException {
            delegate.flush(endOfInput);
        }

        @Override
        public Collection<KafkaCommittable> prepareCommit() throws IOException, InterruptedException {
            return delegate.prepareCommit();
        }

        @Override
        public List<KafkaWriterState> snapshotState(long checkpointId) throws IOException {
            return delegate.snapshotState(checkpointId);
        }

        @Override
        public void close() throws Exception {
            releaseTag.run();
            try {
                delegate.close();
            } catch (Exception e) {
                Optional<Throwable> fenced = fencingError(e);
                if (fenced.isEmpty()) {
                    throw e;
                }
                fencedCloses.inc();
                LOG.warn("{}: closing a stale Kafka writer whose producer a newer attempt fenced ({}): its open"
                        + " transaction is aborted and the newer attempt replays its records from the restored"
                        + " checkpoint, so nothing is lost. Not rethrown: in the task's cleanup it would take the"
                        + " whole TaskManager down (see 'What a woken zombie logs' in docs/failover.md)", description,
                        fenced.get().toString(), e);
            }
        }
    }
}
