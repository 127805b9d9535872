package io.onceflow.tools.audit;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The result of an {@link Audit}: what went in, what came out, and every message id (or poison
 * record) that came out a number of times other than once. {@link #clean()} is the verdict.
 */
public final class AuditReport {
    /** How many example ids a finding lists; the counts are always complete. */
    static final int SAMPLE_SIZE = 10;

    long inputRecords;
    long acceptedRecords;
    long uniqueIds;
    final Map<String, Long> expectedDeadLettersByReason = new TreeMap<>();
    long outputRecords;
    final Finding missingIds = new Finding();
    final Finding duplicatedIds = new Finding();
    final Finding unexpectedIds = new Finding();
    long deadLetterRecords;
    final Map<String, Long> deadLettersByReason = new TreeMap<>();
    final Finding missingDeadLetters = new Finding();
    final Finding duplicatedDeadLetters = new Finding();
    final Finding unexpectedDeadLetters = new Finding();
    final Finding wrongReasonDeadLetters = new Finding();
    boolean postgresAudited;
    long postgresRows;
    long maxDeliveries;
    final Finding postgresMissingIds = new Finding();
    final Finding postgresUnexpectedIds = new Finding();
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

    /** A count of offending ids with the first few as examples. */
    static final class Finding {
        long count;
        final List<String> examples = new ArrayList<>();

        void add(String id) {
            count++;
            if (examples.size() < SAMPLE_SIZE) {
                examples.add(id);
            }
        }

        Map<String, Object> toMap() {
            Map<String, Object> map = new LinkedHashMap<>();
            map.put("count", count);
            map.put("examples", examples);
            return map;
        }
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

    public long outputRecords() {
        return outputRecords;
    }

    public long missingIds() {
        return missingIds.count;
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

    public boolean postgresAudited() {
        return postgresAudited;
    }

    public long postgresRows() {
        return postgresRows;
    }

    public long postgresMissingIds() {
        return postgresMissingIds.count;
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
        describe(problems, missingIds, "ids missing from the output topic");
        describe(problems, duplicatedIds, "ids more than once in the output topic");
        describe(problems, unexpectedIds, "ids in the output topic that no accepted input record has");
        describe(problems, missingDeadLetters, "poison records missing from the dead-letter topic");
        describe(problems, duplicatedDeadLetters, "poison records more than once in the dead-letter topic");
        describe(problems, unexpectedDeadLetters, "dead letters whose source record is not poison");
        describe(problems, wrongReasonDeadLetters, "dead letters with a reason other than the expected one");
        describe(problems, postgresMissingIds, "ids missing from the PostgreSQL table");
        describe(problems, postgresUnexpectedIds, "rows in the PostgreSQL table that no accepted input record has");
        describe(problems, postgresUnexpectedRejects, "rows in the rejects table that no accepted input record has");
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
        text.append("input records           ").append(inputRecords).append('\n')
                .append("  accepted              ").append(acceptedRecords).append('\n')
                .append("  unique ids            ").append(uniqueIds).append('\n')
                .append("  duplicates (to drop)  ").append(duplicateRecords()).append('\n')
                .append("  poison (dead letters) ").append(expectedDeadLettersByReason).append('\n')
                .append("output topic (read_committed)\n")
                .append("  records               ").append(outputRecords).append('\n')
                .append("  ids missing           ").append(missingIds.count).append('\n')
                .append("  ids duplicated        ").append(duplicatedIds.count).append('\n')
                .append("  ids unexpected        ").append(unexpectedIds.count).append('\n')
                .append("dead-letter topic (read_committed)\n")
                .append("  records               ").append(deadLetterRecords).append('\n')
                .append("  by reason             ").append(deadLettersByReason).append('\n')
                .append("  missing               ").append(missingDeadLetters.count).append('\n')
                .append("  duplicated            ").append(duplicatedDeadLetters.count).append('\n');
        if (postgresAudited) {
            text.append("PostgreSQL table\n")
                    .append("  rows                  ").append(postgresRows).append('\n')
                    .append("  ids rejected          ").append(postgresRejectedIds.count)
                    .append(postgresRejectsBySqlState.isEmpty() ? "" : " by SQLSTATE " + postgresRejectsBySqlState)
                    .append(" (in the rejects table)").append('\n')
                    .append("  ids missing           ").append(postgresMissingIds.count).append('\n')
                    .append("  ids unexpected        ").append(postgresUnexpectedIds.count).append('\n')
                    .append("  max(deliveries)       ").append(maxDeliveries).append('\n')
                    .append("  prepared txns left    ").append(preparedTransactionsLeft.count).append('\n');
            if (effectsAudited) {
                text.append("  effects applied       ").append(effectsApplied).append('\n')
                        .append("  effects rejected      ").append(withExamples(effectsRejected)).append('\n')
                        .append("  effects failed        ").append(withExamples(effectsFailed)).append('\n')
                        .append("  effects missing       ").append(effectsMissing.count).append('\n');
            }
        }
        List<String> problems = problems();
        text.append(problems.isEmpty() ? "VERDICT: clean, every id exactly once\n" : "VERDICT: FAILED\n");
        problems.forEach(problem -> text.append("  - ").append(problem).append('\n'));
        return text.toString();
    }

    private static String withExamples(Finding finding) {
        return finding.count + (finding.count == 0 ? "" : ", e.g. " + finding.examples);
    }

    /** The report for machines. */
    public String toJson() {
        Map<String, Object> json = new LinkedHashMap<>();
        Map<String, Object> input = new LinkedHashMap<>();
        input.put("records", inputRecords);
        input.put("accepted", acceptedRecords);
        input.put("uniqueIds", uniqueIds);
        input.put("duplicates", duplicateRecords());
        input.put("deadLettersByReason", expectedDeadLettersByReason);
        json.put("input", input);
        Map<String, Object> output = new LinkedHashMap<>();
        output.put("records", outputRecords);
        output.put("idsMissing", missingIds.toMap());
        output.put("idsDuplicated", duplicatedIds.toMap());
        output.put("idsUnexpected", unexpectedIds.toMap());
        json.put("output", output);
        Map<String, Object> deadLetters = new LinkedHashMap<>();
        deadLetters.put("records", deadLetterRecords);
        deadLetters.put("byReason", deadLettersByReason);
        deadLetters.put("missing", missingDeadLetters.toMap());
        deadLetters.put("duplicated", duplicatedDeadLetters.toMap());
        deadLetters.put("unexpected", unexpectedDeadLetters.toMap());
        deadLetters.put("wrongReason", wrongReasonDeadLetters.toMap());
        json.put("deadLetters", deadLetters);
        if (postgresAudited) {
            Map<String, Object> postgres = new LinkedHashMap<>();
            postgres.put("rows", postgresRows);
            postgres.put("idsMissing", postgresMissingIds.toMap());
            postgres.put("idsUnexpected", postgresUnexpectedIds.toMap());
            postgres.put("rejected", postgresRejectedIds.toMap());
            postgres.put("rejectsBySqlState", postgresRejectsBySqlState);
            postgres.put("unexpectedRejects", postgresUnexpectedRejects.toMap());
            postgres.put("maxDeliveries", maxDeliveries);
            postgres.put("repeatedDeliveries", postgresRepeatedDeliveries.toMap());
            postgres.put("preparedTransactionsLeft", preparedTransactionsLeft.toMap());
            if (effectsAudited) {
                Map<String, Object> effects = new LinkedHashMap<>();
                effects.put("applied", effectsApplied);
                effects.put("rejected", effectsRejected.toMap());
                effects.put("failed", effectsFailed.toMap());
                effects.put("missing", effectsMissing.toMap());
                postgres.put("effects", effects);
            }
            json.put("postgres", postgres);
        }
        json.put("clean", clean());
        json.put("problems", problems());
        try {
            return new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT).writeValueAsString(json);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("could not render the audit as JSON", e);
        }
    }
}
