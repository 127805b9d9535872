package io.onceflow.tools.audit;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The result of an {@link Audit}: what went in, the outcome of each accepted id (an output, a dead
 * letter of the processor), what came out, and every message id (or poison record) that came out a
 * number of times other than once. {@link #clean()} is the verdict.
 */
public final class AuditReport {
    /** How many of a finding's examples a line of the text report shows. */
    private static final int TEXT_EXAMPLES = 3;

    long inputRecords;
    long acceptedRecords;
    long uniqueIds;
    final Map<String, Long> expectedDeadLettersByReason = new TreeMap<>();
    /** The outcome of each unique id: exactly one of these (or one of the problems after them). */
    final Finding outputIds = new Finding();
    final Finding derivedOnlyIds = new Finding();
    final Map<String, Finding> processorDeadLetters = new TreeMap<>();
    /** Ids with no outcome at all: lost. */
    final Finding missingIds = new Finding();
    final Finding outputAndDeadLetterIds = new Finding();
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
    final Finding postgresRepeatedDeliveries = new Finding();
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
    /** Rows without a result although an effect is configured: the effect never ran for them. */
    final Finding effectsMissing = new Finding();

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

    /** Rows without a result while an effect is configured. */
    public long effectsMissing() {
        return effectsMissing.count;
    }

    /** Every problem found, one line each; empty when the audit is clean. */
    public List<String> problems() {
        List<String> problems = new ArrayList<>();
        describe(problems, missingIds, "ids lost: no output record and no dead letter");
        describe(problems, duplicatedIds, "ids more than once in the output topic");
        describe(problems, outputAndDeadLetterIds, "ids both in the output topic and dead-lettered by the processor");
        describe(problems, duplicatedProcessorDeadLetters, "ids dead-lettered by the processor more than once");
        describe(problems, unexpectedIds, "ids in the output topic that are no accepted input id and do not name"
                + " an accepted input record as their source");
        describe(problems, missingDeadLetters, "poison records missing from the dead-letter topic");
        describe(problems, duplicatedDeadLetters, "poison records more than once in the dead-letter topic");
        describe(problems, unexpectedDeadLetters, "dead letters whose source record is not in the input topics");
        describe(problems, wrongReasonDeadLetters, "dead letters with a reason other than the expected one");
        describe(problems, postgresMissingIds, "ids with output missing from the PostgreSQL table");
        describe(problems, postgresUnexpectedIds, "rows in the PostgreSQL table that no output id has");
        describe(problems, postgresUnexpectedRejects, "rows in the rejects table that no output id has");
        describe(problems, postgresDeadLetteredIds, "rows in PostgreSQL of ids the processor dead-lettered");
        describe(problems, postgresRepeatedDeliveries,
                "rows delivered more than once (a duplicate passed dedup, e.g. after its TTL expired)");
        describe(problems, preparedTransactionsLeft, "prepared PostgreSQL transactions of this job left behind");
        describe(problems, effectsMissing, "rows in the PostgreSQL table whose effect is still pending"
                + " (committed, no result yet)");
        return problems;
    }

    private static void describe(List<String> problems, Finding finding, String what) {
        if (finding.count > 0) {
            problems.add(finding.count + " " + what + ", e.g. " + finding.examples);
        }
    }

    public boolean clean() {
        return problems().isEmpty();
    }

    /** The report for people. */
    public String toText() {
        StringBuilder text = new StringBuilder();
        line(text, "input records", inputRecords);
        line(text, "  accepted", acceptedRecords);
        line(text, "  unique ids", uniqueIds);
        line(text, "  duplicates (to drop)", duplicateRecords());
        text.append("outcome of each unique id (exactly one)\n");
        line(text, "  output", withExamples(outputIds));
        if (derivedOnlyIds.count > 0) {
            line(text, "  output, derived ids only", withExamples(derivedOnlyIds));
        }
        if (postgresAudited) {
            line(text, "    row refused", postgresRejectedIds.count + " (in the rejects table)");
            if (effectsAudited) {
                line(text, "    effect rejected", effectsRejected.count + " (business rejection, in the row's result)");
            }
        }
        line(text, "  dead letter by processor",
                processorDeadLetters.values().stream().mapToLong(ids -> ids.count).sum());
        processorDeadLetters.forEach((reason, ids) -> line(text, "    " + reason, withExamples(ids)));
        line(text, "  lost (no outcome)", missingIds.count);
        line(text, "  output + dead letter", outputAndDeadLetterIds.count);
        line(text, "dead letter by ingest", expectedDeadLettersByReason.values().stream().mapToLong(Long::longValue).sum()
                + " poison records " + expectedDeadLettersByReason);
        text.append("output topic (read_committed)\n");
        line(text, "  records", outputRecords);
        line(text, "  derived ids", withExamples(derivedIds));
        line(text, "  ids duplicated", duplicatedIds.count);
        line(text, "  ids unexpected", unexpectedIds.count);
        text.append("dead-letter topic (read_committed)\n");
        line(text, "  records", deadLetterRecords);
        line(text, "  by reason", deadLettersByReason);
        line(text, "  poison missing", missingDeadLetters.count);
        line(text, "  poison duplicated", duplicatedDeadLetters.count);
        line(text, "  processor duplicated", duplicatedProcessorDeadLetters.count);
        if (postgresAudited) {
            text.append("PostgreSQL table\n");
            line(text, "  rows", postgresRows);
            line(text, "  ids refused", postgresRejectedIds.count
                    + (postgresRejectsBySqlState.isEmpty() ? "" : " by SQLSTATE " + postgresRejectsBySqlState)
                    + " (in the rejects table)");
            line(text, "  ids missing", postgresMissingIds.count);
            line(text, "  ids unexpected", postgresUnexpectedIds.count);
            line(text, "  ids dead-lettered", postgresDeadLetteredIds.count);
            line(text, "  max(deliveries)", maxDeliveries);
            line(text, "  prepared txns left", preparedTransactionsLeft.count);
            if (effectsAudited) {
                line(text, "  effects applied", effectsApplied);
                line(text, "  effects rejected", withExamples(effectsRejected));
                line(text, "  effects failed", withExamples(effectsFailed));
                line(text, "  effects missing", effectsMissing.count);
            }
        }
        List<String> problems = problems();
        text.append(problems.isEmpty() ? "VERDICT: clean, every id has exactly one outcome\n" : "VERDICT: FAILED\n");
        problems.forEach(problem -> text.append("  - ").append(problem).append('\n'));
        return text.toString();
    }

    /** One line of the text report, its values aligned in a column. */
    private static void line(StringBuilder text, String label, Object value) {
        text.append(String.format("%-28s", label)).append(value).append('\n');
    }

    /** The count and the first few examples, so that a line for people stays short (the JSON has more). */
    private static String withExamples(Finding finding) {
        return finding.count + (finding.count == 0 ? ""
                : ", e.g. " + finding.examples.subList(0, Math.min(TEXT_EXAMPLES, finding.examples.size())));
    }

    /** The report for machines. */
    public String toJson() {
        return AuditReportJson.render(this);
    }
}
