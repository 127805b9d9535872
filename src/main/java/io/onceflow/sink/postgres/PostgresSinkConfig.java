package io.onceflow.sink.postgres;

import java.io.Serializable;
import java.time.Duration;
import org.apache.flink.annotation.Internal;

/**
 * Internal. The validated settings of a PostgreSQL sink (see {@link PostgresSinkBuilder}), shipped
 * to the task managers inside the sink. {@link #toString()} leaves the password out.
 *
 * @param sinkPrefix null for the at-least-once sink, which prepares no transactions
 */
@Internal
record PostgresSinkConfig(
        String jdbcUrl,
        String user,
        String password,
        String table,
        String commitLogTable,
        String sinkPrefix,
        int batchSize,
        Duration lockTimeout,
        Duration statementTimeout)
        implements Serializable {

    PostgresSchema schema() {
        return new PostgresSchema(table, commitLogTable);
    }

    @Override
    public String toString() {
        return "jdbcUrl=" + jdbcUrl + ", user=" + user + ", table=" + table + ", commitLogTable=" + commitLogTable
                + ", sinkPrefix=" + sinkPrefix + ", batchSize=" + batchSize + ", lockTimeout=" + lockTimeout
                + ", statementTimeout=" + statementTimeout;
    }
}
