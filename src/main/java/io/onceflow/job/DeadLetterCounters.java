package io.onceflow.job;

import io.onceflow.ingest.DeadLetter;
import io.onceflow.ingest.DeadLetterReason;
import java.util.EnumMap;
import java.util.Map;
import java.util.function.Predicate;
import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.metrics.SimpleCounter;

/**
 * The dead-letter counters of one operator, one per reason it can give. Each is the counter
 * {@code deadLetters} in the group {@code reason} whose value is the reason: Flink's reporters turn that
 * value into a variable, so Prometheus gets one name with a {@code reason} label
 * ({@code flink_taskmanager_job_task_operator_reason_deadLetters{reason="MALFORMED_JSON"}}), and a new reason
 * needs no new name in a query. The same counter is also registered under the name used up to 0.1
 * ({@code deadLetters.<REASON>}, the reason in the name), deprecated, to be removed in the next release
 * (docs/alerts.md). Internal to the job.
 */
final class DeadLetterCounters {
    /** The group key whose value, the reason, becomes the label. */
    private static final String REASON_GROUP = "reason";
    private static final String COUNTER = "deadLetters";

    private final Map<DeadLetterReason, Counter> byReason = new EnumMap<>(DeadLetterReason.class);

    /**
     * @param operator the operator's metric group
     * @param reasons the reasons the operator gives; a counter is registered for each
     */
    DeadLetterCounters(MetricGroup operator, Predicate<DeadLetterReason> reasons) {
        MetricGroup deprecatedNames = operator.addGroup(COUNTER);
        for (DeadLetterReason reason : DeadLetterReason.values()) {
            if (reasons.test(reason)) {
                Counter counter = operator.addGroup(REASON_GROUP, reason.name()).counter(COUNTER, new SimpleCounter());
                byReason.put(reason, deprecatedNames.counter(reason.name(), counter));
            }
        }
    }

    void count(DeadLetter deadLetter) {
        byReason.get(DeadLetterReason.valueOf(deadLetter.reason)).inc();
    }
}
