package io.onceflow.tools.audit;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;

/** {@link AuditReport#toJson()}: the report for machines, in the sections of the text report. */
final class AuditReportJson {
    private AuditReportJson() {}

    static String render(AuditReport report) {
        Map<String, Object> json = new LinkedHashMap<>();
        json.put("warnings", report.warnings);
        json.put("scope", scope(report));
        Map<String, Object> input = new LinkedHashMap<>();
        input.put("records", report.inputRecords);
        input.put("accepted", report.acceptedRecords);
        input.put("uniqueIds", report.uniqueIds);
        input.put("duplicates", report.duplicateRecords());
        input.put("deadLettersByReason", report.expectedDeadLettersByReason);
        json.put("input", input);
        Map<String, Object> outcomes = new LinkedHashMap<>();
        outcomes.put("output", report.outputIds.toMap());
        outcomes.put("outputDerivedIdsOnly", report.derivedOnlyIds.toMap());
        Map<String, Object> deadLettered = new TreeMap<>();
        report.processorDeadLetters.forEach((reason, ids) -> deadLettered.put(reason, ids.toMap()));
        outcomes.put("filtered", report.filteredIds.toMap());
        outcomes.put("processorDeadLetters", deadLettered);
        outcomes.put("lost", report.missingIds.toMap());
        outcomes.put("outputAndDeadLetter", report.outputAndDeadLetterIds.toMap());
        json.put("outcomes", outcomes);
        Map<String, Object> redeliveries = new LinkedHashMap<>();
        redeliveries.put("absorbed", report.absorbedRedeliveries.toMap());
        redeliveries.put("afterDedupTtl", report.redeliveredAfterTtl.toMap());
        redeliveries.put("dedupTtlSeconds", report.dedupTtl.toSeconds());
        json.put("redeliveries", redeliveries);
        Map<String, Object> output = new LinkedHashMap<>();
        output.put("records", report.outputRecords);
        output.put("derivedIds", report.derivedIds.toMap());
        output.put("idsDuplicated", report.duplicatedIds.toMap());
        output.put("idsUnexpected", report.unexpectedIds.toMap());
        json.put("output", output);
        Map<String, Object> deadLetters = new LinkedHashMap<>();
        deadLetters.put("records", report.deadLetterRecords);
        deadLetters.put("byReason", report.deadLettersByReason);
        deadLetters.put("missing", report.missingDeadLetters.toMap());
        deadLetters.put("duplicated", report.duplicatedDeadLetters.toMap());
        deadLetters.put("processorDuplicated", report.duplicatedProcessorDeadLetters.toMap());
        deadLetters.put("unexpected", report.unexpectedDeadLetters.toMap());
        deadLetters.put("wrongReason", report.wrongReasonDeadLetters.toMap());
        json.put("deadLetters", deadLetters);
        if (report.postgresAudited) {
            json.put("postgres", postgres(report));
        }
        json.put("clean", report.clean());
        json.put("problems", report.problems());
        try {
            return new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT).writeValueAsString(json);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("could not render the audit as JSON", e);
        }
    }

    /** Whole topics, or a live audit's bound, what it left in flight and how often it looked again. */
    private static Map<String, Object> scope(AuditReport report) {
        Map<String, Object> scope = new LinkedHashMap<>();
        scope.put("live", report.live());
        if (report.live()) {
            scope.put("group", report.scope.group());
            Map<String, Object> bound = new LinkedHashMap<>();
            report.scope.bound().forEach((partition, offset) -> bound.put(partition.topic() + "-" + partition.partition(),
                    report.scope.uncommitted().contains(partition) ? null : offset));
            scope.put("offsets", bound);
            Map<String, Object> inFlight = new LinkedHashMap<>();
            inFlight.put("inputRecords", report.inFlightInputRecords);
            inFlight.put("ids", report.inFlightIds);
            inFlight.put("outputRecords", report.inFlightOutputRecords);
            inFlight.put("deadLetters", report.inFlightDeadLetters);
            inFlight.put("rows", report.inFlightRows);
            scope.put("inFlight", inFlight);
            scope.put("rechecks", report.rechecks);
            scope.put("recheckedSeconds", report.recheckedFor.toSeconds());
        }
        return scope;
    }

    private static Map<String, Object> postgres(AuditReport report) {
        Map<String, Object> postgres = new LinkedHashMap<>();
        postgres.put("rows", report.postgresRows);
        postgres.put("idsMissing", report.postgresMissingIds.toMap());
        postgres.put("idsUnexpected", report.postgresUnexpectedIds.toMap());
        postgres.put("idsDeadLettered", report.postgresDeadLetteredIds.toMap());
        postgres.put("rejected", report.postgresRejectedIds.toMap());
        postgres.put("rejectsBySqlState", report.postgresRejectsBySqlState);
        postgres.put("unexpectedRejects", report.postgresUnexpectedRejects.toMap());
        postgres.put("maxDeliveries", report.maxDeliveries);
        postgres.put("overDelivered", report.overDeliveredRows.toMap());
        postgres.put(report.live() ? "preparedTransactionsInFlight" : "preparedTransactionsLeft",
                report.preparedTransactionsLeft.toMap());
        if (report.effectsAudited) {
            Map<String, Object> effects = new LinkedHashMap<>();
            effects.put("applied", report.effectsApplied);
            effects.put("rejected", report.effectsRejected.toMap());
            effects.put("failed", report.effectsFailed.toMap());
            effects.put("skipped", report.effectsSkipped.toMap());
            effects.put(report.live() ? "queuedInFlight" : "missing", report.effectsMissing.toMap());
            postgres.put("effects", effects);
        }
        if (report.resultsTopic != null) {
            Map<String, Object> results = new LinkedHashMap<>();
            results.put("topic", report.resultsTopic);
            results.put("published", report.resultsPublished);
            results.put("breaches", report.resultsProblems.toMap());
            postgres.put("resultsTopic", results);
        }
        return postgres;
    }
}
