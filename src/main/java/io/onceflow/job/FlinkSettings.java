package io.onceflow.job;

import io.onceflow.config.OnceflowConfig;
import io.onceflow.config.StateBackendKind;
import org.apache.flink.annotation.Internal;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.CoreOptions;
import org.apache.flink.configuration.ExternalizedCheckpointRetention;
import org.apache.flink.configuration.PipelineOptions;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.core.execution.CheckpointingMode;
import org.apache.flink.state.rocksdb.RocksDBNativeMetricOptions;

/**
 * What Flink is told about a job: the settings of its execution environment and its name. Public
 * through {@link io.onceflow.job.Onceflow#flinkConfiguration} and {@link
 * io.onceflow.job.Onceflow#jobName}.
 */
@Internal
public final class FlinkSettings {
    private FlinkSettings() {}

    /** The job name shown in Flink's UI: names the input and output, never a secret. */
    public static String jobName(OnceflowConfig config) {
        return "onceflow " + String.join(",", config.inputTopics()) + " -> " + config.outputTopic();
    }

    /**
     * The Flink settings the configuration implies: exactly-once, aligned checkpoints (the sinks'
     * transactions commit on them), retained on cancellation, the state backend, no Kryo fallback, object reuse,
     * and the redacted configuration as the job parameters Flink's web UI shows.
     */
    public static Configuration configuration(OnceflowConfig config) {
        Configuration flink = new Configuration();
        flink.set(CheckpointingOptions.CHECKPOINTING_INTERVAL, config.checkpointInterval());
        flink.set(CheckpointingOptions.CHECKPOINTING_CONSISTENCY_MODE, CheckpointingMode.EXACTLY_ONCE);
        flink.set(CheckpointingOptions.CHECKPOINTING_TIMEOUT, config.checkpointTimeout());
        flink.set(CheckpointingOptions.MIN_PAUSE_BETWEEN_CHECKPOINTS, config.checkpointMinPause());
        flink.set(CheckpointingOptions.TOLERABLE_FAILURE_NUMBER, config.tolerableCheckpointFailures());
        // aligned: a record read before a barrier is in that checkpoint's transactions at every
        // writer, which the order of business effects across writer subtasks rests on (docs/effects.md)
        flink.set(CheckpointingOptions.ENABLE_UNALIGNED, false);
        flink.set(CheckpointingOptions.EXTERNALIZED_CHECKPOINT_RETENTION,
                ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION);
        config.checkpointDir().ifPresent(dir -> flink.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, dir));
        if (config.stateBackend() == StateBackendKind.ROCKSDB) {
            flink.set(StateBackendOptions.STATE_BACKEND, "rocksdb");
            flink.set(CheckpointingOptions.INCREMENTAL_CHECKPOINTS, true);
            // RocksDB's estimate of the keys in each state: for dedup, the ids it tracks (what the
            // "ids in dedup state" panel and docs/alerts.md show), at the cost of one property read
            // per column family and reporter interval. The state's name is a label, not part of the name.
            flink.set(RocksDBNativeMetricOptions.ESTIMATE_NUM_KEYS, true);
            flink.set(RocksDBNativeMetricOptions.COLUMN_FAMILY_AS_VARIABLE, true);
        } else {
            flink.set(StateBackendOptions.STATE_BACKEND, "hashmap");
        }
        // a Kryo fallback is slow and breaks savepoint compatibility silently: fail instead
        flink.set(PipelineOptions.GENERIC_TYPES, false);
        // Chained operators pass events on without a deep copy (four per event otherwise; measured
        // ~5% less CPU per record, docs/benchmarks.md). Safe: the source creates new objects, no
        // operator keeps an event it has passed on, the Kafka sinks serialise an event when they get
        // it, and the PostgreSQL sink copies a row's values when it buffers the row. So even an
        // EventProcessor that changes an event after emitting it cannot corrupt an output.
        flink.set(PipelineOptions.OBJECT_REUSE, true);
        config.parallelism().ifPresent(p -> flink.set(CoreOptions.DEFAULT_PARALLELISM, p));
        flink.set(PipelineOptions.GLOBAL_JOB_PARAMETERS, config.toJobParameters().toMap());
        return flink;
    }
}
