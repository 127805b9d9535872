package io.onceflow.tools.audit;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.config.PostgresSettings;
import io.onceflow.ingest.DeadLetterReason;
import io.onceflow.testing.PipelineScenario;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The audit of a deployment whose processor rejects, fails on and filters some ids and derives a
 * refund from another, against the real broker and database: the records and rows are written as
 * the job writes them ({@link JobRecords}), so that a loss or a duplicate can be injected where a
 * real run cannot make one.
 */
class AuditOutcomesTest {
    private final PipelineScenario scenario = new PipelineScenario("audit").withPostgres();
    private final PostgresSettings postgres = scenario.config().postgres().orElseThrow();
    private JobRecords job;
    private RecordMetadata poison;

    @BeforeEach
    void aRunWithRejectionsFailuresAFilterARefusedRowAnEffectRejectionAndADerivedId() throws Exception {
        job = new JobRecords(scenario);
        for (String id : List.of("paid-1", "paid-2", "paid-3", "refused-1", "refunded-1")) {
            job.output(id, job.in(id));
        }
        job.in("paid-1"); // re-sent: dedup drops it
        job.output("refunded-1:refund", job.firstInput("refunded-1"));
        for (String id : List.of("paid-1", "paid-2", "refunded-1", "refunded-1:refund")) {
            job.row(id, "{\"status\": \"applied\"}");
        }
        job.row("paid-3", "{\"status\": \"rejected\", \"reason\": \"insufficient funds\"}");
        scenario.database().execute("INSERT INTO " + postgres.rejectsTable() + " (id, payload, sql_state, error)"
                + " VALUES ('refused-1', '{}', '23514', 'check constraint')");
        for (String id : List.of("rejected-1", "rejected-2")) {
            job.deadLetter(id.getBytes(UTF_8), DeadLetterReason.REJECTED_BY_PROCESSOR, job.in(id));
        }
        job.deadLetter("failed-1".getBytes(UTF_8), DeadLetterReason.PROCESSOR_FAILED, job.in("failed-1"));
        job.deadLetter("filtered-1".getBytes(UTF_8), DeadLetterReason.FILTERED_BY_PROCESSOR, job.in("filtered-1"));
        poison = job.poison("original-key");
        job.deadLetter("original-key".getBytes(UTF_8), DeadLetterReason.MALFORMED_JSON, poison);
    }

    @AfterEach
    void closeProducer() {
        job.close();
    }

    @Test
    void everyIdHasExactlyOneOutcomeCountedPerOutcome() {
        AuditReport report = scenario.audit();

        assertThat(report.problems()).isEmpty();
        assertThat(report.warnings()).as("nothing open: the job is not running").isEmpty();
        assertThat(report.uniqueIds()).isEqualTo(9);
        assertThat(report.outputIds()).isEqualTo(5);
        assertThat(report.processorDeadLetters())
                .isEqualTo(Map.of("REJECTED_BY_PROCESSOR", 2L, "PROCESSOR_FAILED", 1L));
        assertThat(report.filteredIds()).isEqualTo(1);
        assertThat(report.expectedDeadLettersByReason()).isEqualTo(Map.of("MALFORMED_JSON", 1L));
        assertThat(report.derivedIds()).isEqualTo(1);
        assertThat(report.postgresRejectedIds()).isEqualTo(1);
        assertThat(report.effectsRejected()).isEqualTo(1);
        assertThat(report.toText()).contains(
                "  output                    5, e.g. [",
                "    row refused             1 (in the rejects table)\n",
                "    effect rejected         1 (business rejection, in the row's result)\n",
                "  filtered by processor     1, e.g. [filtered-1]\n",
                "  dead letter by processor  3\n",
                "    PROCESSOR_FAILED        1, e.g. [failed-1]\n",
                "  lost (no outcome)         0\n",
                "dead letter by ingest       1 poison records {MALFORMED_JSON=1}\n",
                "  derived ids               1, e.g. [refunded-1:refund (from refunded-1)]\n",
                "VERDICT: clean, every id has exactly one outcome\n");
        assertThat(report.toJson()).contains("\"REJECTED_BY_PROCESSOR\" : {\n        \"count\" : 2,",
                "\"filtered\" : {\n      \"count\" : 1,\n      \"examples\" : [ \"filtered-1\" ]");
        assertThat(report.toText().lines().filter(line -> line.startsWith("  output  ")).findFirst().orElseThrow())
                .as("a line for people shows three examples").matches("  output +5, e\\.g\\. \\[[^,]+, [^,]+, [^,]+\\]");
        assertThat(report.toJson()).as("the JSON counts them all").contains("\"output\" : {\n      \"count\" : 5,");
    }

    @Test
    void anIdWhoseEventTheProcessorReplacedHasItsOutputUnderTheDerivedId() throws Exception {
        job.output("replaced-1:v2", job.in("replaced-1"));
        job.row("replaced-1:v2", "{\"status\": \"applied\"}");

        AuditReport report = scenario.audit();

        assertThat(report.problems()).isEmpty();
        assertThat(report.derivedOnlyIds()).isEqualTo(1);
        assertThat(report.toText()).contains("  output, derived ids only  1, e.g. [replaced-1]\n");
    }

    @Test
    void anIdThatNeverCameOutIsALoss() {
        job.in("lost-1");

        AuditReport report = scenario.audit();

        assertThat(report.problems()).containsExactly(
                "1 ids lost: no output record and no dead letter, e.g. [lost-1]",
                "1 ids with output missing from the PostgreSQL table, e.g. [lost-1]");
        assertThat(report.toText()).contains("VERDICT: FAILED\n");
    }

    @Test
    void aMissingRowIsALoss() throws Exception {
        scenario.database().execute("DELETE FROM " + postgres.table() + " WHERE id = 'paid-2'");

        assertThat(scenario.audit().problems())
                .containsExactly("1 ids with output missing from the PostgreSQL table, e.g. [paid-2]");
    }

    @Test
    void aSecondOutputIsADuplicate() {
        job.output("paid-1", job.firstInput("paid-1"));
        job.output("refunded-1:refund", job.firstInput("refunded-1"));

        List<String> problems = scenario.audit().problems();
        assertThat(problems).hasSize(1);
        assertThat(problems.get(0)).startsWith("2 ids more than once in the output topic (from records within"
                + " dedup.ttl), e.g. [").contains("paid-1 x2", "refunded-1:refund x2");
    }

    @Test
    void anOutputOrARowForADeadLetteredOrFilteredIdIsADuplicate() throws Exception {
        job.output("rejected-1", job.firstInput("rejected-1"));
        job.row("rejected-2", "{\"status\": \"applied\"}");
        job.row("filtered-1", "{\"status\": \"applied\"}");
        job.deadLetter("failed-1".getBytes(UTF_8), DeadLetterReason.PROCESSOR_FAILED, job.firstInput("failed-1"));

        List<String> problems = scenario.audit().problems();
        assertThat(problems).hasSize(3);
        assertThat(problems).contains(
                "1 ids both in the output topic and dead-lettered or filtered by the processor, e.g. [rejected-1]",
                "1 ids dead-lettered or filtered by the processor more than once (from records within dedup.ttl),"
                        + " e.g. [failed-1 x2]");
        assertThat(problems.get(2)).startsWith("2 rows in PostgreSQL of ids the processor dead-lettered or filtered,"
                + " e.g. [").contains("rejected-2", "filtered-1");
    }

    @Test
    void anIdDerivedFromNoAcceptedRecordIsUnexpected() {
        job.output("ghost:refund", poison);

        assertThat(scenario.audit().problems()).containsExactly("1 ids in the output topic that are no accepted"
                + " input id and do not name an accepted input record as their source, e.g. [ghost:refund]");
    }
}
