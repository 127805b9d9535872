package io.onceflow.sink.postgres.internal;

import io.onceflow.sink.postgres.options.EffectResultsTopic;
import io.onceflow.sink.postgres.options.PostgresConnectionOptions;
import io.onceflow.sink.postgres.options.PostgresTableOptions;
import io.onceflow.sink.postgres.options.PostgresWriterOptions;
import java.io.Serializable;
import org.apache.flink.annotation.Internal;

/**
 * Internal. The validated settings of a PostgreSQL sink (see {@code PostgresSinkBuilder}), shipped
 * to the task managers inside the sink: the three option groups as the builder checked them, and
 * what the start added. {@link #toString()} leaves the password out.
 *
 * @param sinkPrefix null for an at-least-once sink without an effect function, which prepares no
 *     transactions and queues no effects
 * @param tolerableCheckpointFailures Flink's {@code execution.checkpointing.tolerable-failed-checkpoints}
 * @param effectResults null for none
 * @param run the run of {@code RegisteredRun}; {@link #NO_RUN} before one is registered
 * @param hooks the tests' hooks into the two-phase protocol; {@link ProtocolHooks#NONE} otherwise
 */
@Internal
public record PostgresSinkConfig(
        PostgresConnectionOptions connection,
        PostgresTableOptions tables,
        PostgresWriterOptions writer,
        String sinkPrefix,
        int tolerableCheckpointFailures,
        EffectResultsTopic effectResults,
        long run,
        ProtocolHooks hooks)
        implements Serializable {

    public static final long NO_RUN = 0;

    /** Settings without hooks. */
    public PostgresSinkConfig(PostgresConnectionOptions connection, PostgresTableOptions tables,
            PostgresWriterOptions writer, String sinkPrefix, int tolerableCheckpointFailures,
            EffectResultsTopic effectResults, long run) {
        this(connection, tables, writer, sinkPrefix, tolerableCheckpointFailures, effectResults, run, ProtocolHooks.NONE);
    }

    public PostgresSchema schema() {
        return new PostgresSchema(tables, sinkPrefix);
    }

    public PostgresSinkConfig withRun(long newRun) {
        return new PostgresSinkConfig(connection, tables, writer, sinkPrefix, tolerableCheckpointFailures, effectResults,
                newRun, hooks);
    }

    /** The same settings with {@code hook} at every protocol step of the sink's writers and committers. */
    public PostgresSinkConfig withHook(ProtocolHooks.Hook hook) {
        return new PostgresSinkConfig(connection, tables, writer, sinkPrefix, tolerableCheckpointFailures, effectResults,
                run, ProtocolHooks.of(hook));
    }

    @Override
    public String toString() {
        return connection + ", " + tables + ", " + writer + ", sinkPrefix=" + sinkPrefix
                + ", tolerableCheckpointFailures=" + tolerableCheckpointFailures
                + (effectResults == null ? "" : ", " + effectResults) + ", run=" + run;
    }
}
