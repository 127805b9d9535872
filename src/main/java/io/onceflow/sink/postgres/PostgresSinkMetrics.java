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
 *   <li>{@code effectsApplied}, {@code effectsRejected}, {@code effectsFailed}: calls of the
 *       {@link EffectFunction} whose result was applied, a business rejection, or an error about the
 *       message that the sink recorded as failed;
 *   <li>{@code transactionsPrepared}: transactions prepared for a checkpoint (exactly-once);
 *   <li>{@code transactionsRolledBackOnRecovery}: abandoned prepared transactions rolled back at start;
 *   <li>{@code olderAttemptsFenced}: sessions of older writer attempts ended at start (zombies).
 * </ul>
 *
 * <p>{@code rowsRejected} and the effect counters count executions: a replay after a failure (of
 * rows whose transaction was rolled back) counts them again, though the database holds each once.
 */
@Internal
final class PostgresSinkMetrics {
    final Counter rowsRejected;
    final Counter effectsApplied;
    final Counter effectsRejected;
    final Counter effectsFailed;
    final Counter transactionsPrepared;
    final Counter transactionsRolledBackOnRecovery;
    final Counter olderAttemptsFenced;

    private PostgresSinkMetrics(Counter rowsRejected, Counter effectsApplied, Counter effectsRejected,
            Counter effectsFailed, Counter transactionsPrepared, Counter transactionsRolledBackOnRecovery,
            Counter olderAttemptsFenced) {
        this.rowsRejected = rowsRejected;
        this.effectsApplied = effectsApplied;
        this.effectsRejected = effectsRejected;
        this.effectsFailed = effectsFailed;
        this.transactionsPrepared = transactionsPrepared;
        this.transactionsRolledBackOnRecovery = transactionsRolledBackOnRecovery;
        this.olderAttemptsFenced = olderAttemptsFenced;
    }

    static PostgresSinkMetrics register(MetricGroup group) {
        return new PostgresSinkMetrics(group.counter("rowsRejected"), group.counter("effectsApplied"),
                group.counter("effectsRejected"), group.counter("effectsFailed"), group.counter("transactionsPrepared"),
                group.counter("transactionsRolledBackOnRecovery"), group.counter("olderAttemptsFenced"));
    }

    /** Counters that no reporter sees, for writers built outside Flink (tests). */
    static PostgresSinkMetrics unregistered() {
        return new PostgresSinkMetrics(new SimpleCounter(), new SimpleCounter(), new SimpleCounter(),
                new SimpleCounter(), new SimpleCounter(), new SimpleCounter(), new SimpleCounter());
    }
}
