package io.onceflow.tools.audit;

import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

/**
 * What the job made of each accepted input id, as the {@link Audit} finds it on Kafka: its own
 * output records, its processor dead letters and the output records the processor derived from it.
 * {@link #classify} turns the counts into one outcome per id and the findings.
 */
final class IdOutcomes {
    private static final int OUTPUTS = 0;
    private static final int DEAD_LETTERS = 1;
    private static final int DERIVED = 2;

    private final Map<String, int[]> counts = new HashMap<>();
    /** The reason of each dead-lettered id's (last) processor dead letter; dead letters are few. */
    private final Map<String, String> deadLetterReasons = new HashMap<>();

    void accepted(String id) {
        counts.computeIfAbsent(id, key -> new int[3]);
    }

    int size() {
        return counts.size();
    }

    /** Counts an output record keyed {@code id}; false when {@code id} is no input id. */
    boolean output(String id) {
        int[] count = counts.get(id);
        if (count == null) {
            return false;
        }
        count[OUTPUTS]++;
        return true;
    }

    void processorDeadLetter(String id, String reason) {
        counts.get(id)[DEAD_LETTERS]++;
        deadLetterReasons.put(id, reason);
    }

    void derivedOutput(String sourceId) {
        counts.get(sourceId)[DERIVED]++;
    }

    /** Ids the processor dead-lettered: a row of theirs is a second outcome. */
    Set<String> deadLettered() {
        return deadLetterReasons.keySet();
    }

    /**
     * The ids that must have a row in PostgreSQL (in the events or the rejects table): every input id
     * but those dead-lettered by the processor or whose output went under derived ids only, and the
     * derived ids accounted for.
     */
    Set<String> rowExpected(Set<String> derivedIds) {
        Set<String> ids = new HashSet<>(counts.size() + derivedIds.size());
        counts.forEach((id, count) -> {
            boolean derivedOnly = count[OUTPUTS] == 0 && count[DERIVED] > 0;
            if (!derivedOnly && count[DEAD_LETTERS] == 0) {
                ids.add(id);
            }
        });
        ids.addAll(derivedIds);
        return ids;
    }

    /** One outcome per id into {@code report}, and every id with none or more than one. */
    void classify(AuditReport report) {
        counts.forEach((id, count) -> {
            int outputs = count[OUTPUTS] + count[DERIVED];
            if (count[OUTPUTS] > 1) {
                report.duplicatedIds.add(id + " x" + count[OUTPUTS]);
            }
            if (count[DEAD_LETTERS] > 1) {
                report.duplicatedProcessorDeadLetters.add(id + " x" + count[DEAD_LETTERS]);
            }
            if (count[DEAD_LETTERS] > 0 && outputs > 0) {
                report.outputAndDeadLetterIds.add(id);
            } else if (count[DEAD_LETTERS] > 0) {
                report.processorDeadLetters.computeIfAbsent(deadLetterReasons.get(id), reason -> new Finding())
                        .add(id);
            } else if (count[OUTPUTS] > 0) {
                report.outputIds.add(id);
            } else if (count[DERIVED] > 0) {
                report.derivedOnlyIds.add(id);
            } else {
                report.missingIds.add(id);
            }
        });
    }
}
