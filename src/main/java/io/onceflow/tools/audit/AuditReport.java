package io.onceflow.tools.audit;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The result of an {@link Audit}: what it covered (the whole topics, or a live job's input up to its
 * last completed checkpoint, and what it left in flight), what went in, the outcome of each accepted
 * id (an output, a dead letter or a filter record of the processor), the redeliveries reported apart,
 * what came out, and every message id (or poison record) that came out a number of times other than
 * once. {@link #clean()} is the verdict; {@link #warnings()} say what may make it wrong.
 */
public final class AuditReport {
    /** What the audit covers: the whole input topics, or a live job's input up to its last checkpoint. */
    final AuditScope scope;
    /** The TTL of the job's dedup, which tells a redelivery after it from a duplicate. */
    final Duration dedupTtl;
    /** Lines for whoever runs the audit, before the report: what may make it wrong. Not problems. */
    final List<String> warnings = new ArrayList<>();
    /** How often a live audit looked again because it found problems, and for how long in all. */
    int rechecks;
    Duration recheckedFor = Duration.ZERO;
    long inputRecords;
    long acceptedRecords;
    long uniqueIds;
    final Map<String, Long> expectedDeadLettersByReason = new TreeMap<>();
    /** The outcome of each unique id: exactly one of these (or one of the problems after them). */
    final Finding outputIds = new Finding();
    final Finding derivedOnlyIds = new Finding();
    final Map<String, Finding> processorDeadLetters = new TreeMap<>();
    /** Ids the processor dropped on purpose (a FILTERED_BY_PROCESSOR record): an outcome. */
    final Finding filteredIds = new Finding();
    /** Ids with no outcome at all: lost. */
    final Finding missingIds = new Finding();
    final Finding outputAndDeadLetterIds = new Finding();
    /** Ids whose outputs (or processor dead letters) came from records farther apart than the dedup TTL. */
    final Finding redeliveredAfterTtl = new Finding();
    /** Ids with one output record and a row whose deliveries count redeliveries: the row absorbed them. */
    final Finding absorbedRedeliveries = new Finding();
    /** Rows delivered more often than their id came in the input: a replay that reached the sink. */
    final Finding overDeliveredRows = new Finding();
    /** What a live audit left alone as possibly in flight: after the bound, of no audited id. */
    long inFlightInputRecords;
    /** Input records after the offsets the job's group committed: what a whole-topic audit warns of. */
    final Finding inputAfterJobPosition = new Finding();
    long inFlightIds;
    long inFlightOutputRecords;
    long inFlightDeadLetters;
    long inFlightRows;
    long outputRecords;
    /** Output ids that are no input id, each named with the input id it was derived from. */
    final Finding derivedIds = new Finding();
    final Finding duplicatedIds = new Finding();
    final Finding unexpectedIds = new Finding();
    long deadLetterRecords;
    final Map<String, Long> deadLettersByReason = new TreeMap<>();
    final Finding missingDeadLetters = new Finding();
    final Finding duplicatedDeadLetters = new Finding();
    final Finding duplicatedProcessorDeadLetters = new Finding();
    final Finding unexpectedDeadLetters = new Finding();
    final Finding wrongReasonDeadLetters = new Finding();
    boolean postgresAudited;
    long postgresRows;
    long maxDeliveries;
    final Finding postgresMissingIds = new Finding();
    final Finding postgresUnexpectedIds = new Finding();
    final Finding postgresDeadLetteredIds = new Finding();
    /** Rows the database refused: accounted for (in the rejects table), so not a problem. */
    final Finding postgresRejectedIds = new Finding();
    final Map<String, Long> postgresRejectsBySqlState = new TreeMap<>();
    final Finding postgresUnexpectedRejects = new Finding();
    final Finding preparedTransactionsLeft = new Finding();
    /** Whether an effect is configured or any row has a result; the effect findings apply only then. */
    boolean effectsAudited;
    long effectsApplied;
    /** Business rejections and failures are outcomes of the effect, recorded once: not problems. */
    final Finding effectsRejected = new Finding();
    final Finding effectsFailed = new Finding();
    final Finding effectsSkipped = new Finding();
    /** Rows without a result although an effect is configured: the effect never ran for them. */
    final Finding effectsMissing = new Finding();
    /** The results topic ({@code postgres.effect.results.topic}), null if none: the findings below apply only then. */
    String resultsTopic;
    long resultsPublished;
    /** Each decided effect's status by id, filled by the table's scan when there is a results topic. */
    final Map<String, String> decidedStatuses = new HashMap<>();
    /** Outcomes published twice, out of order or under another key, and decided ones not (yet) published. */
    final Finding resultsProblems = new Finding();

    AuditReport(AuditScope scope, Duration dedupTtl) {
        this.scope = scope;
        this.dedupTtl = dedupTtl;
    }

    /** Whether this is a live audit, of the input up to the job's last completed checkpoint. */
    public boolean live() {
        return scope.live();
    }

    /** What may make this report wrong, one line each (e.g. a job still running under a whole-topic audit). */
    public List<String> warnings() {
        return Collections.unmodifiableList(warnings);
    }

    /** How often a live audit looked again because it had found problems. */
    public int rechecks() {
        return rechecks;
    }

    public long inputRecords() {
        return inputRecords;
    }

    public long acceptedRecords() {
        return acceptedRecords;
    }

    public long uniqueIds() {
        return uniqueIds;
    }

    /** Accepted records whose id had been seen before in the input. */
    public long duplicateRecords() {
        return acceptedRecords - uniqueIds;
    }

    public Map<String, Long> expectedDeadLettersByReason() {
        return Collections.unmodifiableMap(expectedDeadLettersByReason);
    }

    /** Unique ids whose outcome is one output record under their own id (and derived ones, maybe). */
    public long outputIds() {
        return outputIds.count;
    }

    /** Unique ids whose outcome is output under derived ids only: the processor replaced the event. */
    public long derivedOnlyIds() {
        return derivedOnlyIds.count;
    }

    /** Unique ids whose outcome is one dead letter of the processor, per reason. */
    public Map<String, Long> processorDeadLetters() {
        Map<String, Long> counts = new TreeMap<>();
        processorDeadLetters.forEach((reason, ids) -> counts.put(reason, ids.count));
        return counts;
    }

    /** Unique ids the processor filtered: it emitted nothing for them, and the job recorded that. */
    public long filteredIds() {
        return filteredIds.count;
    }

    /** Ids output (or dead-lettered) again by a redelivery after the dedup TTL: a known limit, not a problem. */
    public long redeliveredAfterTtl() {
        return redeliveredAfterTtl.count;
    }

    /** Ids with one output record whose row counts more than one delivery: absorbed, not a problem. */
    public long absorbedRedeliveries() {
        return absorbedRedeliveries.count;
    }

    /** Rows delivered more often than their id came in the input. */
    public long overDeliveredRows() {
        return overDeliveredRows.count;
    }

    /** Unique ids without any outcome: no output record, no dead letter. */
    public long missingIds() {
        return missingIds.count;
    }

    /** Unique ids with both an output and a dead letter of the processor. */
    public long outputAndDeadLetterIds() {
        return outputAndDeadLetterIds.count;
    }

    public long outputRecords() {
        return outputRecords;
    }

    /** Output ids that are no input id but name an accepted input record as their source. */
    public long derivedIds() {
        return derivedIds.count;
    }

    public long duplicatedIds() {
        return duplicatedIds.count;
    }

    public long unexpectedIds() {
        return unexpectedIds.count;
    }

    public long deadLetterRecords() {
        return deadLetterRecords;
    }

    public Map<String, Long> deadLettersByReason() {
        return Collections.unmodifiableMap(deadLettersByReason);
    }

    public long missingDeadLetters() {
        return missingDeadLetters.count;
    }

    public long duplicatedDeadLetters() {
        return duplicatedDeadLetters.count;
    }

    /** Ids the processor dead-lettered more than once. */
    public long duplicatedProcessorDeadLetters() {
        return duplicatedProcessorDeadLetters.count;
    }

    public boolean postgresAudited() {
        return postgresAudited;
    }

    public long postgresRows() {
        return postgresRows;
    }

    public long postgresMissingIds() {
        return postgresMissingIds.count;
    }

    /** Rows (in the events or the rejects table) of ids the processor dead-lettered. */
    public long postgresDeadLetteredIds() {
        return postgresDeadLetteredIds.count;
    }

    /** The largest {@code deliveries} in the table: 1 when no duplicate ever reached PostgreSQL. */
    public long maxDeliveries() {
        return maxDeliveries;
    }

    /** Ids in the rejects table: accepted input that the database refused, with the reason recorded. */
    public long postgresRejectedIds() {
        return postgresRejectedIds.count;
    }

    public Map<String, Long> postgresRejectsBySqlState() {
        return Collections.unmodifiableMap(postgresRejectsBySqlState);
    }

    public long preparedTransactionsLeft() {
        return preparedTransactionsLeft.count;
    }

    /** Rows whose effect result is neither a rejection nor a failure. */
    public long effectsApplied() {
        return effectsApplied;
    }

    /** Rows whose effect rejected the message ({@code "status":"rejected"}). */
    public long effectsRejected() {
        return effectsRejected.count;
    }

    /** Rows whose effect raised an error that the sink recorded ({@code "status":"failed"}). */
    public long effectsFailed() {
        return effectsFailed.count;
    }

    /** Rows whose failed effect an operator skipped ({@code "status":"skipped"}). */
    public long effectsSkipped() {
        return effectsSkipped.count;
    }

    /** Records on the results topic; 0 without one. */
    public long resultsPublished() {
        return resultsPublished;
    }

    /** Rows without a result while an effect is configured. */
    public long effectsMissing() {
        return effectsMissing.count;
    }

    /**
     * Every problem found, one line each; empty when the audit is clean. A live audit does not count
     * what a running job has in flight: its prepared transactions and the effects still queued.
     */
    public List<String> problems() {
        return AuditProblems.of(this);
    }

    public boolean clean() {
        return problems().isEmpty();
    }

    /** The report for people. */
    public String toText() {
        return AuditReportText.render(this);
    }

    /** The report for machines. */
    public String toJson() {
        return AuditReportJson.render(this);
    }
}
