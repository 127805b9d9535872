package io.onceflow.sink.kafka;

import java.io.IOException;
import java.util.Collection;
import org.apache.flink.annotation.Internal;
import org.apache.flink.api.connector.sink2.Committer;
import org.apache.flink.api.connector.sink2.CommitterInitContext;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.connector.kafka.sink.KafkaCommittable;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.sink.KafkaWriterState;
import org.apache.flink.connector.kafka.sink.TwoPhaseCommittingStatefulSink;
import org.apache.flink.core.io.SimpleVersionedSerializer;
import org.apache.flink.streaming.api.connector.sink2.CommittableMessage;
import org.apache.flink.streaming.api.connector.sink2.SupportsPostCommitTopology;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.lineage.LineageVertex;
import org.apache.flink.streaming.api.lineage.LineageVertexProvider;

/**
 * Internal. Flink's {@link KafkaSink}, unchanged, except that each writer attempt passes a
 * {@link KafkaWriterGate} before the connector creates its first producer.
 *
 * <p>Why a wrapper: a restoring {@code KafkaWriter} initialises the transactional ids after the
 * restored checkpoint to abort what its previous attempt left open, and in doing so fences any
 * producer that uses those ids now. When another job took over the prefixes (a newer run of the
 * sink prefix, registered while this job was between restarts), that is the newer job's producer,
 * and its open transaction is aborted. The connector has no hook before that step, so the check
 * runs here, before the delegate's {@code createWriter}/{@code restoreWriter}. Everything else
 * (writer state, committables, committer, post-commit topology, lineage) is the delegate's.
 */
@Internal
public final class GuardedKafkaSink<IN>
        implements TwoPhaseCommittingStatefulSink<IN, KafkaWriterState, KafkaCommittable>,
                SupportsPostCommitTopology<KafkaCommittable>, LineageVertexProvider {
    private static final long serialVersionUID = 1L;

    private final KafkaSink<IN> delegate;
    private final KafkaWriterGate gate;

    GuardedKafkaSink(KafkaSink<IN> delegate, KafkaWriterGate gate) {
        this.delegate = delegate;
        this.gate = gate;
    }

    @Override
    public PrecommittingStatefulSinkWriter<IN, KafkaWriterState, KafkaCommittable> createWriter(
            WriterInitContext context) throws IOException {
        gate.beforeProducersStart();
        return delegate.createWriter(context);
    }

    @Override
    public PrecommittingStatefulSinkWriter<IN, KafkaWriterState, KafkaCommittable> restoreWriter(
            WriterInitContext context, Collection<KafkaWriterState> recoveredState) throws IOException {
        gate.beforeProducersStart();
        return delegate.restoreWriter(context, recoveredState);
    }

    @Override
    public SimpleVersionedSerializer<KafkaWriterState> getWriterStateSerializer() {
        return delegate.getWriterStateSerializer();
    }

    @Override
    public Committer<KafkaCommittable> createCommitter(CommitterInitContext context) throws IOException {
        return delegate.createCommitter(context);
    }

    @Override
    public SimpleVersionedSerializer<KafkaCommittable> getCommittableSerializer() {
        return delegate.getCommittableSerializer();
    }

    @Override
    public void addPostCommitTopology(DataStream<CommittableMessage<KafkaCommittable>> committables) {
        delegate.addPostCommitTopology(committables);
    }

    @Override
    public LineageVertex getLineageVertex() {
        return delegate.getLineageVertex();
    }
}
