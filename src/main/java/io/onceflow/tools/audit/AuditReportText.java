package io.onceflow.tools.audit;

import io.onceflow.config.ProgramArguments;
import java.util.List;
import java.util.stream.Collectors;
import org.apache.kafka.common.TopicPartition;

/** {@link AuditReport#toText()}: the report for people, one section per outcome and per source. */
final class AuditReportText {
    /** How many of a finding's examples a line of the text report shows. */
    private static final int TEXT_EXAMPLES = 3;
    /** How many partitions' bounds a line shows; the JSON has them all. */
    private static final int BOUNDS_SHOWN = 8;

    private AuditReportText() {}

    static String render(AuditReport report) {
        StringBuilder text = new StringBuilder();
        report.warnings.forEach(warning -> text.append("WARNING: ").append(warning).append('\n'));
        if (report.live()) {
            live(text, report);
        }
        line(text, "input records", report.inputRecords);
        line(text, "  accepted", report.acceptedRecords);
        line(text, "  unique ids", report.uniqueIds);
        line(text, "  duplicates (to drop)", report.duplicateRecords());
        outcomes(text, report);
        text.append("redeliveries (not problems)\n");
        line(text, "  absorbed by the row", withExamples(report.absorbedRedeliveries)
                + (report.absorbedRedeliveries.count == 0 ? "" : " (one output, deliveries > 1)"));
        line(text, "  after dedup.ttl (" + ProgramArguments.formatDuration(report.dedupTtl) + ")",
                withExamples(report.redeliveredAfterTtl));
        line(text, "dead letter by ingest", report.expectedDeadLettersByReason.values().stream()
                .mapToLong(Long::longValue).sum() + " poison records " + report.expectedDeadLettersByReason);
        text.append("output topic (read_committed)\n");
        line(text, "  records", report.outputRecords);
        line(text, "  derived ids", withExamples(report.derivedIds));
        line(text, "  ids duplicated", report.duplicatedIds.count);
        line(text, "  ids unexpected", report.unexpectedIds.count);
        text.append("dead-letter topic (read_committed)\n");
        line(text, "  records", report.deadLetterRecords);
        line(text, "  by reason", report.deadLettersByReason);
        line(text, "  poison missing", report.missingDeadLetters.count);
        line(text, "  poison duplicated", report.duplicatedDeadLetters.count);
        line(text, "  processor duplicated", report.duplicatedProcessorDeadLetters.count);
        if (report.postgresAudited) {
            postgres(text, report);
        }
        List<String> problems = report.problems();
        text.append(problems.isEmpty() ? "VERDICT: clean, every id has exactly one outcome\n" : "VERDICT: FAILED\n");
        problems.forEach(problem -> text.append("  - ").append(problem).append('\n'));
        return text.toString();
    }

    private static void live(StringBuilder text, AuditReport report) {
        AuditScope scope = report.scope;
        text.append("live audit: the input up to the offsets group '").append(scope.group())
                .append("' committed at the job's last completed checkpoint\n");
        List<String> bounds = scope.bound().entrySet().stream()
                .filter(bound -> !scope.uncommitted().contains(bound.getKey()))
                .map(bound -> name(bound.getKey()) + " < " + bound.getValue()).toList();
        line(text, "  bound", String.join(", ", bounds.subList(0, Math.min(BOUNDS_SHOWN, bounds.size())))
                + (bounds.size() > BOUNDS_SHOWN ? " and " + (bounds.size() - BOUNDS_SHOWN) + " more" : ""));
        if (!scope.uncommitted().isEmpty()) {
            line(text, "  no committed offset", scope.uncommitted().stream().map(AuditReportText::name).sorted()
                    .collect(Collectors.joining(", ")) + " (not audited)");
        }
        line(text, "  in flight (not audited)", report.inFlightInputRecords + " input records ("
                + report.inFlightIds + " ids), " + report.inFlightOutputRecords + " output records, "
                + report.inFlightDeadLetters + " dead letters, " + report.inFlightRows + " rows");
        if (report.rechecks > 0) {
            line(text, "  re-checked", report.rechecks + " times over "
                    + ProgramArguments.formatDuration(report.recheckedFor) + " (the sinks commit after the offsets)");
        }
    }

    private static void outcomes(StringBuilder text, AuditReport report) {
        text.append("outcome of each unique id (exactly one)\n");
        line(text, "  output", withExamples(report.outputIds));
        if (report.derivedOnlyIds.count > 0) {
            line(text, "  output, derived ids only", withExamples(report.derivedOnlyIds));
        }
        if (report.postgresAudited) {
            line(text, "    row refused", report.postgresRejectedIds.count + " (in the rejects table)");
            if (report.effectsAudited) {
                line(text, "    effect rejected", report.effectsRejected.count
                        + " (business rejection, in the row's result)");
            }
        }
        line(text, "  filtered by processor", withExamples(report.filteredIds));
        line(text, "  dead letter by processor",
                report.processorDeadLetters.values().stream().mapToLong(ids -> ids.count).sum());
        report.processorDeadLetters.forEach((reason, ids) -> line(text, "    " + reason, withExamples(ids)));
        line(text, "  lost (no outcome)", report.missingIds.count);
        line(text, "  output + dead letter", report.outputAndDeadLetterIds.count);
    }

    private static void postgres(StringBuilder text, AuditReport report) {
        text.append("PostgreSQL table\n");
        line(text, "  rows", report.postgresRows);
        line(text, "  ids refused", report.postgresRejectedIds.count + (report.postgresRejectsBySqlState.isEmpty() ? ""
                : " by SQLSTATE " + report.postgresRejectsBySqlState) + " (in the rejects table)");
        line(text, "  ids missing", report.postgresMissingIds.count);
        line(text, "  ids unexpected", report.postgresUnexpectedIds.count);
        line(text, "  ids dead-lettered", report.postgresDeadLetteredIds.count);
        line(text, "  max(deliveries)", report.maxDeliveries);
        line(text, "  over-delivered rows", report.overDeliveredRows.count);
        line(text, report.live() ? "  prepared txns (in flight)" : "  prepared txns left",
                report.preparedTransactionsLeft.count);
        if (report.effectsAudited) {
            line(text, "  effects applied", report.effectsApplied);
            line(text, "  effects rejected", withExamples(report.effectsRejected));
            line(text, "  effects failed", withExamples(report.effectsFailed));
            if (report.effectsSkipped.count > 0) {
                line(text, "  effects skipped", withExamples(report.effectsSkipped));
            }
            line(text, report.live() ? "  effects queued (in flight)" : "  effects missing", report.effectsMissing.count);
        }
        if (report.resultsTopic != null) {
            line(text, "  outcomes published", report.resultsPublished);
            line(text, "  results topic breaches", withExamples(report.resultsProblems));
        }
    }

    private static String name(TopicPartition partition) {
        return partition.topic() + "-" + partition.partition();
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
}
