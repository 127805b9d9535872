package io.onceflow.job;

import io.onceflow.ingest.DeadLetter;
import io.onceflow.ingest.DeadLetterReason;
import java.util.EnumMap;
import java.util.Map;
import java.util.function.Predicate;
import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.MetricGroup;

/** The counters {@code deadLetters.<REASON>} of one operator, for the reasons it can give. Internal to the job. */
final class DeadLetterCounters {
    private final Map<DeadLetterReason, Counter> byReason = new EnumMap<>(DeadLetterReason.class);

    /**
     * @param operator the operator's metric group
     * @param reasons the reasons the operator gives; a counter is registered for each
     */
    DeadLetterCounters(MetricGroup operator, Predicate<DeadLetterReason> reasons) {
        MetricGroup deadLetters = operator.addGroup("deadLetters");
        for (DeadLetterReason reason : DeadLetterReason.values()) {
            if (reasons.test(reason)) {
                byReason.put(reason, deadLetters.counter(reason.name()));
            }
        }
    }

    void count(DeadLetter deadLetter) {
        byReason.get(DeadLetterReason.valueOf(deadLetter.reason)).inc();
    }
}
