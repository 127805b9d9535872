package io.onceflow.tools.audit;

import java.util.ArrayList;
import java.util.List;

/** {@link AuditReport#problems()}: which of an audit's findings fail it, one line each with examples. */
final class AuditProblems {
    private AuditProblems() {}

    static List<String> of(AuditReport report) {
        List<String> problems = new ArrayList<>();
        describe(problems, report.missingIds, "ids lost: no output record and no dead letter");
        describe(problems, report.duplicatedIds, "ids more than once in the output topic (from records within dedup.ttl)");
        describe(problems, report.outputAndDeadLetterIds,
                "ids both in the output topic and dead-lettered or filtered by the processor");
        describe(problems, report.duplicatedProcessorDeadLetters,
                "ids dead-lettered or filtered by the processor more than once (from records within dedup.ttl)");
        describe(problems, report.unexpectedIds, "ids in the output topic that are no accepted input id and do not name"
                + " an accepted input record as their source");
        describe(problems, report.missingDeadLetters, "poison records missing from the dead-letter topic");
        describe(problems, report.duplicatedDeadLetters, "poison records more than once in the dead-letter topic");
        describe(problems, report.unexpectedDeadLetters, "dead letters whose source record is not in the input topics");
        describe(problems, report.wrongReasonDeadLetters, "dead letters with a reason other than the expected one");
        describe(problems, report.postgresMissingIds, "ids with output missing from the PostgreSQL table");
        describe(problems, report.postgresUnexpectedIds, "rows in the PostgreSQL table that no output id has");
        describe(problems, report.postgresUnexpectedRejects, "rows in the rejects table that no output id has");
        describe(problems, report.postgresDeadLetteredIds, "rows in PostgreSQL of ids the processor dead-lettered or filtered");
        describe(problems, report.overDeliveredRows, "rows delivered more often than their id came in the input"
                + " (input replayed into the sink, e.g. from an older checkpoint)");
        describe(problems, report.resultsProblems, "breaches of the results topic " + report.resultsTopic);
        if (!report.live()) {
            describe(problems, report.preparedTransactionsLeft, "prepared PostgreSQL transactions of this job left behind");
            describe(problems, report.effectsMissing, "rows in the PostgreSQL table whose effect is still pending"
                    + " (committed, no result yet)");
        }
        return problems;
    }

    private static void describe(List<String> problems, Finding finding, String what) {
        if (finding.count > 0) {
            problems.add(finding.count + " " + what + ", e.g. " + finding.examples);
        }
    }
}
