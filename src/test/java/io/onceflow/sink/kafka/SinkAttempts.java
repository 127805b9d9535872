package io.onceflow.sink.kafka;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.ingest.DeadLetter;
import io.onceflow.ingest.DeadLetterReason;
import io.onceflow.testing.RecordingCommitRequest;
import io.onceflow.testing.TestKafka;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Properties;
import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.JobInfo;
import org.apache.flink.api.common.JobInfoImpl;
import org.apache.flink.api.common.TaskInfo;
import org.apache.flink.api.common.TaskInfoImpl;
import org.apache.flink.api.common.operators.MailboxExecutor;
import org.apache.flink.api.common.operators.ProcessingTimeService;
import org.apache.flink.api.common.serialization.SerializationSchema;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.connector.sink2.Committer;
import org.apache.flink.api.connector.sink2.CommitterInitContext;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaCommittable;
import org.apache.flink.connector.kafka.sink.KafkaWriterState;
import org.apache.flink.connector.kafka.sink.TwoPhaseCommittingStatefulSink;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.metrics.groups.SinkCommitterMetricGroup;
import org.apache.flink.metrics.groups.SinkWriterMetricGroup;
import org.apache.flink.metrics.groups.UnregisteredMetricsGroup;
import org.apache.flink.runtime.mailbox.SyncMailboxExecutor;
import org.apache.flink.runtime.metrics.groups.MetricsGroupTestUtils;
import org.apache.flink.streaming.runtime.tasks.TestProcessingTimeService;
import org.apache.flink.util.SimpleUserCodeClassLoader;
import org.apache.flink.util.UserCodeClassLoader;

/**
 * Writer and committer attempts of a job's dead-letter sink against the shared test broker, as Flink
 * creates them in a task, without a cluster: each test drives the interleaving of attempts itself.
 */
final class SinkAttempts {
    /** The checkpoint every attempt restored. */
    static final long RESTORED = 5;
    private static final JobInfo JOB = new JobInfoImpl(new JobID(), "sink-attempts");

    final TestKafka kafka = TestKafka.shared();
    final String topic = TestKafka.uniqueTopic("attempts");
    /** The job's transactional id prefix; the dead-letter sink's is {@link #sinkPrefix()}. */
    final String prefix;
    final TwoPhaseCommittingStatefulSink<DeadLetter, KafkaWriterState, KafkaCommittable> sink;

    @SuppressWarnings("unchecked")
    SinkAttempts(String purpose) {
        kafka.createTopics(1, topic);
        prefix = purpose + "-" + System.nanoTime();
        sink = (TwoPhaseCommittingStatefulSink<DeadLetter, KafkaWriterState, KafkaCommittable>) new KafkaSinks(
                kafka.bootstrapServers(), new Properties(), DeliveryGuarantee.EXACTLY_ONCE, prefix, Duration.ofMinutes(5),
                KafkaWriterGate.OPEN).deadLetters(topic);
    }

    String sinkPrefix() {
        return prefix + "-dlq";
    }

    /** Attempt {@code attempt}'s writer of subtask 0 of 1, restored from {@link #RESTORED}. */
    TwoPhaseCommittingStatefulSink.PrecommittingStatefulSinkWriter<DeadLetter, KafkaWriterState, KafkaCommittable> writer(
            int attempt) throws Exception {
        return writer(attempt, 0, 1);
    }

    TwoPhaseCommittingStatefulSink.PrecommittingStatefulSinkWriter<DeadLetter, KafkaWriterState, KafkaCommittable> writer(
            int attempt, int subtask, int parallelism) throws Exception {
        return sink.restoreWriter(writerContext(new TaskInfoImpl("Dead-letter topic", 128, subtask, parallelism,
                attempt)), List.of());
    }

    /** Writes a dead letter and sends it, in the writer's open transaction, as a killed attempt leaves it. */
    void writeAndLeaveOpen(
            TwoPhaseCommittingStatefulSink.PrecommittingStatefulSinkWriter<DeadLetter, KafkaWriterState, KafkaCommittable> writer,
            long offset) throws Exception {
        writer.write(deadLetter(offset), NO_CONTEXT);
        writer.flush(false);
    }

    /** Writes a dead letter and pre-commits the writer's transaction as at a barrier. */
    KafkaCommittable writeAndPrecommit(
            TwoPhaseCommittingStatefulSink.PrecommittingStatefulSinkWriter<DeadLetter, KafkaWriterState, KafkaCommittable> writer,
            long offset, long barrier) throws Exception {
        writer.write(deadLetter(offset), NO_CONTEXT);
        writer.flush(false);
        Collection<KafkaCommittable> committables = writer.prepareCommit();
        writer.snapshotState(barrier);
        assertThat(committables).hasSize(1);
        return committables.iterator().next();
    }

    /** The committable as a restored committer reads it back from a checkpoint: without its producer. */
    KafkaCommittable restored(KafkaCommittable committable) throws Exception {
        var serializer = sink.getCommittableSerializer();
        return serializer.deserialize(serializer.getVersion(), serializer.serialize(committable));
    }

    /** Commits with attempt {@code attempt}'s committer; returns how the request ended. */
    RecordingCommitRequest<KafkaCommittable> commit(KafkaCommittable committable, int attempt) throws Exception {
        RecordingCommitRequest<KafkaCommittable> request = new RecordingCommitRequest<>(committable);
        try (Committer<KafkaCommittable> committer = sink.createCommitter(committerContext(attempt))) {
            committer.commit(List.of(request));
        }
        return request;
    }

    int readCommitted() {
        return kafka.readCommitted(topic, Duration.ofSeconds(20)).size();
    }

    private static DeadLetter deadLetter(long offset) {
        return new DeadLetter(null, "{not json".getBytes(), DeadLetterReason.MALFORMED_JSON, "bad", "in", 0, offset, 0L,
                Map.of());
    }

    private static final SinkWriter.Context NO_CONTEXT = new SinkWriter.Context() {
        @Override
        public long currentWatermark() {
            return Long.MIN_VALUE;
        }

        @Override
        public Long timestamp() {
            return null;
        }
    };

    private static TaskInfo task(int attempt) {
        return new TaskInfoImpl("Dead-letter topic", 128, 0, 1, attempt);
    }

    static CommitterInitContext committerContext(int attempt) {
        SinkCommitterMetricGroup metrics = MetricsGroupTestUtils.mockCommitterMetricGroup();
        return new CommitterInitContext() {
            @Override
            public SinkCommitterMetricGroup metricGroup() {
                return metrics;
            }

            @Override
            public OptionalLong getRestoredCheckpointId() {
                return OptionalLong.of(RESTORED);
            }

            @Override
            public JobInfo getJobInfo() {
                return JOB;
            }

            @Override
            public TaskInfo getTaskInfo() {
                return task(attempt);
            }
        };
    }

    private static WriterInitContext writerContext(TaskInfo task) {
        return new WriterInitContext() {
            @Override
            public UserCodeClassLoader getUserCodeClassLoader() {
                return SimpleUserCodeClassLoader.create(SinkAttempts.class.getClassLoader());
            }

            @Override
            public MailboxExecutor getMailboxExecutor() {
                return new SyncMailboxExecutor();
            }

            @Override
            public ProcessingTimeService getProcessingTimeService() {
                return new TestProcessingTimeService();
            }

            @Override
            public SinkWriterMetricGroup metricGroup() {
                return MetricsGroupTestUtils.mockWriterMetricGroup();
            }

            @Override
            public SerializationSchema.InitializationContext asSerializationSchemaInitializationContext() {
                return new SerializationSchema.InitializationContext() {
                    @Override
                    public MetricGroup getMetricGroup() {
                        return new UnregisteredMetricsGroup();
                    }

                    @Override
                    public UserCodeClassLoader getUserCodeClassLoader() {
                        return SimpleUserCodeClassLoader.create(SinkAttempts.class.getClassLoader());
                    }
                };
            }

            @Override
            public boolean isObjectReuseEnabled() {
                return false;
            }

            @Override
            public <IN> TypeSerializer<IN> createInputSerializer() {
                throw new UnsupportedOperationException();
            }

            @Override
            public OptionalLong getRestoredCheckpointId() {
                return OptionalLong.of(RESTORED);
            }

            @Override
            public JobInfo getJobInfo() {
                return JOB;
            }

            @Override
            public TaskInfo getTaskInfo() {
                return task;
            }
        };
    }
}
