package io.onceflow.sink.postgres.internal;

import java.util.function.LongSupplier;
import org.apache.flink.annotation.Internal;
import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.Gauge;
import org.apache.flink.metrics.Histogram;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.metrics.groups.UnregisteredMetricsGroup;
import org.apache.flink.runtime.metrics.DescriptiveStatisticsHistogram;

/**
 * Internal. The metrics of a PostgreSQL sink's writer and committer, each in its operator's metric
 * group (so a reporter shows them under the job, the operator and the subtask):
 *
 * <ul>
 *   <li>{@code rowsRejected}: rows the database refused, recorded in the rejects table;
 *   <li>{@code effectsApplied}, {@code effectsRejected}, {@code effectsFailed}: calls of the
 *       {@link EffectFunction} whose result was applied, a business rejection, or an error about the
 *       message that the sink recorded as failed;
 *   <li>{@code effectRetries}: effect transactions rolled back for a reason that is not about a
 *       message (lock timeout, deadlock, cancel, lost connection, missing privilege) and tried again;
 *   <li>{@code transactionsPrepared}: transactions prepared for a checkpoint (exactly-once);
 *   <li>{@code rowsPerTransaction}: events written into each prepared transaction (histogram);
 *   <li>{@code commitLatencyMs}: from the committer being told that the checkpoint completed to its
 *       {@code COMMIT PREPARED} returning, per transaction (histogram; the effects it then calls are
 *       not included);
 *   <li>{@code transactionsRolledBackOnRecovery}: abandoned prepared transactions rolled back at a
 *       writer's first checkpoint barrier;
 *   <li>{@code olderAttemptsFenced}: sessions of older writer attempts (zombies) ended at a writer's
 *       first checkpoint barrier;
 *   <li>{@code serverChangesSeen}: writers that found the server changed since the run was
 *       registered (a failover to a replica, a restored copy), and reconciled at their first barrier;
 *   <li>{@code transactionsCommittedOnRecovery}: prepared transactions of completed checkpoints that
 *       such a reconciliation committed (their commit had been lost with the failover);
 *   <li>{@code transactionsLost}: transactions of completed checkpoints that the committer found
 *       neither prepared nor committed: their rows are missing (logged as {@code LOST:});
 *   <li>{@code eventsSpilledBeforeBarrier}: events a writer attempt held beyond
 *       {@code postgres.held.events.memory.bytes} before its first checkpoint barrier, in a local
 *       spill file;
 *   <li>{@code staleWriterAttemptsRefused}: writers that found a newer run or a newer claim owning
 *       what they were about to touch, and stopped (the zombie's side of the fence; counted in the
 *       refused attempt's own group, which lives until its task fails);
 *   <li>{@code effectsQueued}, {@code oldestQueuedEffectSeconds}, {@code effectsAwaitingRedrive},
 *       {@code staleQueuedEffects}, {@code effectWorkerLoopAgeSeconds}: the effect backlog, the
 *       failures waiting for an operator, the queue rows no worker can take and the worker's liveness (gauges of the writer, with an effect function; see {@link
 *       #reportEffectBacklog}).
 * </ul>
 *
 * <p>Transactions committed, committed before (a restored committable), waiting for their checkpoint
 * to complete, retried and failed are Flink's own committer metrics ({@code successfulCommittables},
 * {@code alreadyCommittedCommittables}, {@code pendingCommittables}, {@code retriedCommittables},
 * {@code failedCommittables}), which the committer operator keeps for every sink.
 *
 * <p>{@code rowsRejected} and the effect counters count executions: a replay after a failure (of
 * rows whose transaction was rolled back) counts them again, though the database holds each once.
 */
@Internal
public final class PostgresSinkMetrics {
    /** Samples the histograms keep: about eight minutes of transactions at one checkpoint a second. */
    private static final int HISTOGRAM_WINDOW = 500;

    public final Counter rowsRejected;
    public final Counter effectsApplied;
    public final Counter effectsRejected;
    public final Counter effectsFailed;
    public final Counter effectRetries;
    public final Counter transactionsPrepared;
    public final Histogram rowsPerTransaction;
    public final Histogram commitLatencyMs;
    public final Counter transactionsRolledBackOnRecovery;
    public final Counter olderAttemptsFenced;
    public final Counter serverChangesSeen;
    public final Counter transactionsCommittedOnRecovery;
    public final Counter transactionsLost;
    public final Counter staleWriterAttemptsRefused;
    public final Counter eventsSpilledBeforeBarrier;
    private final MetricGroup group;

    private PostgresSinkMetrics(MetricGroup group) {
        this.group = group;
        rowsRejected = group.counter("rowsRejected");
        effectsApplied = group.counter("effectsApplied");
        effectsRejected = group.counter("effectsRejected");
        effectsFailed = group.counter("effectsFailed");
        effectRetries = group.counter("effectRetries");
        transactionsPrepared = group.counter("transactionsPrepared");
        rowsPerTransaction = group.histogram("rowsPerTransaction", new DescriptiveStatisticsHistogram(HISTOGRAM_WINDOW));
        commitLatencyMs = group.histogram("commitLatencyMs", new DescriptiveStatisticsHistogram(HISTOGRAM_WINDOW));
        transactionsRolledBackOnRecovery = group.counter("transactionsRolledBackOnRecovery");
        olderAttemptsFenced = group.counter("olderAttemptsFenced");
        serverChangesSeen = group.counter("serverChangesSeen");
        transactionsCommittedOnRecovery = group.counter("transactionsCommittedOnRecovery");
        transactionsLost = group.counter("transactionsLost");
        staleWriterAttemptsRefused = group.counter("staleWriterAttemptsRefused");
        eventsSpilledBeforeBarrier = group.counter("eventsSpilledBeforeBarrier");
    }

    /**
     * Registers the effect worker's gauges, where one runs: {@code effectsQueued} (effects whose
     * inbox row committed and that no transaction has applied yet), {@code
     * oldestQueuedEffectSeconds} (how long the oldest of them has waited), {@code
     * effectsAwaitingRedrive} (effects that failed and wait for an operator to re-drive or skip
     * them), {@code staleQueuedEffects} (queued effects whose inbox row is gone, which no worker can
     * take) and {@code effectWorkerLoopAgeSeconds} (since the worker's loop last came round: it
     * grows while the worker is stuck). Every worker reads the same queue: alert on the maximum over
     * subtasks, not the sum.
     */
    public void reportEffectBacklog(LongSupplier queued, LongSupplier oldestQueuedSeconds,
            LongSupplier awaitingRedrive, LongSupplier stale, LongSupplier loopAgeSeconds) {
        group.gauge("effectsQueued", (Gauge<Long>) queued::getAsLong);
        group.gauge("oldestQueuedEffectSeconds", (Gauge<Long>) oldestQueuedSeconds::getAsLong);
        group.gauge("effectsAwaitingRedrive", (Gauge<Long>) awaitingRedrive::getAsLong);
        group.gauge("staleQueuedEffects", (Gauge<Long>) stale::getAsLong);
        group.gauge("effectWorkerLoopAgeSeconds", (Gauge<Long>) loopAgeSeconds::getAsLong);
    }

    public static PostgresSinkMetrics register(MetricGroup group) {
        return new PostgresSinkMetrics(group);
    }

    /** Metrics that no reporter sees, for writers built outside Flink (tests). */
    public static PostgresSinkMetrics unregistered() {
        return new PostgresSinkMetrics(new UnregisteredMetricsGroup());
    }
}
