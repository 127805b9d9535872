package io.onceflow.sink.postgres;

import org.apache.flink.annotation.Internal;
import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.metrics.SimpleCounter;

/**
 * Internal. The metrics of a PostgreSQL sink writer, in its operator's metric group (so a reporter
 * shows them under the job, the operator and the subtask):
 *
 * <ul>
 *   <li>{@code rowsRejected}: rows the database refused, recorded in the rejects table;
 *   <li>{@code transactionsPrepared}: transactions prepared for a checkpoint (exactly-once);
 *   <li>{@code transactionsRolledBackOnRecovery}: abandoned prepared transactions rolled back at start;
 *   <li>{@code olderAttemptsFenced}: sessions of older writer attempts ended at start (zombies).
 * </ul>
 */
@Internal
final class PostgresSinkMetrics {
    final Counter rowsRejected;
    final Counter transactionsPrepared;
    final Counter transactionsRolledBackOnRecovery;
    final Counter olderAttemptsFenced;

    private PostgresSinkMetrics(Counter rowsRejected, Counter transactionsPrepared,
            Counter transactionsRolledBackOnRecovery, Counter olderAttemptsFenced) {
        this.rowsRejected = rowsRejected;
        this.transactionsPrepared = transactionsPrepared;
        this.transactionsRolledBackOnRecovery = transactionsRolledBackOnRecovery;
        this.olderAttemptsFenced = olderAttemptsFenced;
    }

    static PostgresSinkMetrics register(MetricGroup group) {
        return new PostgresSinkMetrics(group.counter("rowsRejected"), group.counter("transactionsPrepared"),
                group.counter("transactionsRolledBackOnRecovery"), group.counter("olderAttemptsFenced"));
    }

    /** Counters that no reporter sees, for writers built outside Flink (tests). */
    static PostgresSinkMetrics unregistered() {
        return new PostgresSinkMetrics(new SimpleCounter(), new SimpleCounter(), new SimpleCounter(), new SimpleCounter());
    }
}
