package io.onceflow.tools.generator;

import io.onceflow.ingest.DeadLetterReason;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;

/**
 * The ground truth of one generator run: which valid ids were sent (each must come out exactly
 * once) and how many poison records of each reason (each must reach the dead-letter topic once).
 */
public final class GeneratedInput {
    private final List<String> uniqueIds = new ArrayList<>();
    private final Map<DeadLetterReason, Long> poisonByReason = new EnumMap<>(DeadLetterReason.class);
    private long records;
    private long duplicates;

    void recordFirstSend(String id) {
        uniqueIds.add(id);
        records++;
    }

    void recordDuplicate() {
        duplicates++;
        records++;
    }

    void recordPoison(DeadLetterReason reason) {
        poisonByReason.merge(reason, 1L, Long::sum);
        records++;
    }

    /** Every valid id sent, once each, in first-send order. */
    public List<String> uniqueIds() {
        return Collections.unmodifiableList(uniqueIds);
    }

    public Map<DeadLetterReason, Long> poisonByReason() {
        return Collections.unmodifiableMap(poisonByReason);
    }

    public long poisonRecords() {
        return poisonByReason.values().stream().mapToLong(Long::longValue).sum();
    }

    public long records() {
        return records;
    }

    public long duplicates() {
        return duplicates;
    }

    @Override
    public String toString() {
        return records + " records: " + uniqueIds.size() + " unique ids, " + duplicates + " duplicates, "
                + poisonRecords() + " poison " + poisonByReason;
    }
}
