package io.onceflow.tools.audit;

import io.onceflow.ingest.DeadLetterReason;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * What the job made of each accepted input id, as the {@link Audit} finds it on Kafka: how often the
 * id came in, its own output records, its processor dead letters (filter records included) and the
 * output records the processor derived from it. {@link #classify} turns the counts into one outcome
 * per id and the findings.
 */
final class IdOutcomes {
    /** Accepted records of the id that the audit covers (before a live audit's bound). */
    private static final int COVERED_RECORDS = 0;
    /** Accepted records of the id read in all, those after the bound included. */
    private static final int RECORDS = 1;
    private static final int OUTPUTS = 2;
    private static final int DEAD_LETTERS = 3;
    private static final int DERIVED = 4;

    private final Map<String, int[]> counts = new HashMap<>();
    /** The processor dead letters of each dead-lettered id: few, or small when filtered. */
    private final Map<String, DeadLettered> deadLettered = new HashMap<>();

    /**
     * The reason of an id's (last) processor dead letter, the record times of the input records that
     * got one, and the times the dead letters themselves were written (the job's processing time).
     */
    private static final class DeadLettered {
        String reason;
        final List<Long> recordTimes = new ArrayList<>(1);
        final List<Long> writtenTimes = new ArrayList<>(1);
    }

    /** @param covered whether the record is one the audit covers, or after a live audit's bound */
    void accepted(String id, boolean covered) {
        int[] count = counts.computeIfAbsent(id, key -> new int[5]);
        count[RECORDS]++;
        if (covered) {
            count[COVERED_RECORDS]++;
        }
    }

    /** What {@link #forgetUncovered} forgot: ids, and the processor dead letters of theirs. */
    record Forgotten(int ids, int deadLetters) {}

    /**
     * Forgets the ids with no record the audit covers: what the job did with them may still be in
     * flight. Call once the input is read.
     */
    Forgotten forgetUncovered() {
        int before = counts.size();
        int deadLetters = 0;
        for (var id = counts.entrySet().iterator(); id.hasNext(); ) {
            int[] count = id.next().getValue();
            if (count[COVERED_RECORDS] == 0) {
                deadLetters += count[DEAD_LETTERS];
                id.remove();
            }
        }
        deadLettered.keySet().retainAll(counts.keySet());
        return new Forgotten(before - counts.size(), deadLetters);
    }

    int size() {
        return counts.size();
    }

    boolean isAudited(String id) {
        return counts.containsKey(id);
    }

    /** The accepted records of {@code id} read in all; 0 for an id the audit does not know. */
    int records(String id) {
        int[] count = counts.get(id);
        return count == null ? 0 : count[RECORDS];
    }

    /** The output records under {@code id} itself; 0 for an id the audit does not know. */
    int outputs(String id) {
        int[] count = counts.get(id);
        return count == null ? 0 : count[OUTPUTS];
    }

    /** Counts an output record keyed {@code id}; false when {@code id} is no audited input id. */
    boolean output(String id) {
        int[] count = counts.get(id);
        if (count == null) {
            return false;
        }
        count[OUTPUTS]++;
        return true;
    }

    /**
     * @param recordTime the timestamp of the input record the dead letter names (its producer's, or
     *     the broker's with LogAppendTime: anything)
     * @param writtenTime the timestamp of the dead letter itself: the job's sink leaves it to its
     *     producer, so it is the time the job wrote it (or the broker's, later, with LogAppendTime)
     */
    void processorDeadLetter(String id, String reason, long recordTime, long writtenTime) {
        counts.get(id)[DEAD_LETTERS]++;
        DeadLettered record = deadLettered.computeIfAbsent(id, key -> new DeadLettered());
        record.reason = reason;
        record.recordTimes.add(recordTime);
        record.writtenTimes.add(writtenTime);
    }

    void derivedOutput(String sourceId) {
        counts.get(sourceId)[DERIVED]++;
    }

    /** Ids the processor dead-lettered or filtered: a row of theirs is a second outcome. */
    Set<String> deadLettered() {
        return deadLettered.keySet();
    }

    /** Ids with more than one output record under their own id. */
    Set<String> withRepeatedOutputs() {
        Set<String> ids = new HashSet<>();
        counts.forEach((id, count) -> {
            if (count[OUTPUTS] > 1) {
                ids.add(id);
            }
        });
        return ids;
    }

    /**
     * The ids that must have a row in PostgreSQL (in the events or the rejects table): every input id
     * but those dead-lettered or filtered by the processor or whose output went under derived ids
     * only, and the derived ids accounted for.
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

    /**
     * One outcome per id into {@code report}, and every id with none or more than one. Two outputs,
     * or two dead letters, of records farther apart than the dedup TTL are a redelivery after it,
     * not a duplicate.
     *
     * @param outputsApart the ids whose repeated output records came from records farther apart than {@code ttl}
     */
    void classify(AuditReport report, Set<String> outputsApart, Duration ttl) {
        counts.forEach((id, count) -> {
            int outputs = count[OUTPUTS] + count[DERIVED];
            if (count[OUTPUTS] > 1) {
                (outputsApart.contains(id) ? report.redeliveredAfterTtl : report.duplicatedIds)
                        .add(id + " x" + count[OUTPUTS]);
            }
            DeadLettered dead = deadLettered.get(id);
            if (count[DEAD_LETTERS] > 1) {
                (redeliveredAfter(dead.recordTimes, dead.writtenTimes, ttl) ? report.redeliveredAfterTtl
                        : report.duplicatedProcessorDeadLetters).add(id + " x" + count[DEAD_LETTERS]);
            }
            if (count[DEAD_LETTERS] > 0 && outputs > 0) {
                report.outputAndDeadLetterIds.add(id);
            } else if (count[DEAD_LETTERS] > 0 && DeadLetterReason.FILTERED_BY_PROCESSOR.name().equals(dead.reason)) {
                report.filteredIds.add(id);
            } else if (count[DEAD_LETTERS] > 0) {
                report.processorDeadLetters.computeIfAbsent(dead.reason, reason -> new Finding()).add(id);
            } else if (count[OUTPUTS] > 0) {
                report.outputIds.add(id);
            } else if (count[DERIVED] > 0) {
                report.derivedOnlyIds.add(id);
            } else {
                report.missingIds.add(id);
            }
        });
    }

    /**
     * Whether two or more outputs (or dead letters) of one id can be a redelivery after the dedup
     * TTL rather than a duplicate: their input records are each farther apart than {@code ttl} in
     * record time, and so are the outputs themselves in the time they were written. The TTL runs in
     * the job's processing time from the first record's processing, and an input record's timestamp
     * is whatever its producer set (an event time, a replay's original time): on its own it would
     * excuse a true duplicate whose records merely carry distant timestamps. The job's sinks leave
     * the output's timestamp to their producer, so it is the time the job wrote it: two outputs
     * written within {@code ttl} of each other came while dedup still remembered the id, whatever
     * their input records say. And two outputs of the same input record (a replay) are never apart
     * in record time.
     */
    static boolean redeliveredAfter(Collection<Long> recordTimes, Collection<Long> writtenTimes, Duration ttl) {
        return fartherApartThan(recordTimes, ttl) && fartherApartThan(writtenTimes, ttl);
    }

    /**
     * Whether records with these timestamps are each farther from the next than {@code ttl}: dedup,
     * which remembers an id for {@code ttl} from its first record, let each of them through. The
     * TTL runs in processing time, so record times are a stand-in: a pair close in record time is
     * always taken for a true duplicate.
     */
    static boolean fartherApartThan(Collection<Long> recordTimes, Duration ttl) {
        List<Long> sorted = new ArrayList<>(recordTimes);
        sorted.sort(null);
        for (int i = 1; i < sorted.size(); i++) {
            if (sorted.get(i) - sorted.get(i - 1) <= ttl.toMillis()) {
                return false;
            }
        }
        return sorted.size() > 1;
    }
}
