package io.onceflow.sink.postgres.internal;

import io.onceflow.sink.postgres.EffectFunction;
import io.onceflow.sink.postgres.PostgresSink;
import io.onceflow.sink.postgres.PostgresSinkBuilder;
import io.onceflow.sink.postgres.internal.schema.PostgresSchema;
import java.io.Serializable;
import java.time.Duration;
import org.apache.flink.annotation.Internal;

/**
 * Internal. The validated settings of a PostgreSQL sink (see {@link PostgresSinkBuilder}), shipped
 * to the task managers inside the sink. {@link #toString()} leaves the password out.
 *
 * @param effectFunction the {@link EffectFunction} to call for each new message id, or null
 * @param sinkPrefix null for the at-least-once sink, which prepares no transactions
 * @param run the run registered by {@link PostgresSink#startRun}; {@link #NO_RUN} before
 */
@Internal
public record PostgresSinkConfig(
        String jdbcUrl,
        String user,
        String password,
        String table,
        String rejectsTable,
        String commitLogTable,
        String runsTable,
        String writersTable,
        String effectFunction,
        String sinkPrefix,
        int batchSize,
        Duration lockTimeout,
        Duration statementTimeout,
        int tolerableCheckpointFailures,
        Duration writerLease,
        long run)
        implements Serializable {

    public static final long NO_RUN = 0;

    public PostgresSchema schema() {
        return new PostgresSchema(table, rejectsTable, commitLogTable, runsTable, writersTable)
                .withEffectFunction(effectFunction);
    }

    public PostgresSinkConfig withRun(long newRun) {
        return new PostgresSinkConfig(jdbcUrl, user, password, table, rejectsTable, commitLogTable, runsTable,
                writersTable, effectFunction, sinkPrefix, batchSize, lockTimeout, statementTimeout,
                tolerableCheckpointFailures, writerLease, newRun);
    }

    @Override
    public String toString() {
        return "jdbcUrl=" + jdbcUrl + ", user=" + user + ", table=" + table + ", rejectsTable=" + rejectsTable
                + ", commitLogTable=" + commitLogTable + ", runsTable=" + runsTable + ", writersTable=" + writersTable
                + ", effectFunction=" + effectFunction + ", sinkPrefix=" + sinkPrefix + ", batchSize=" + batchSize
                + ", lockTimeout=" + lockTimeout + ", statementTimeout=" + statementTimeout + ", tolerableCheckpointFailures="
                + tolerableCheckpointFailures + ", writerLease=" + writerLease + ", run=" + run;
    }
}
