package io.onceflow.tools.audit;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.ingest.DeadLetterReason;
import io.onceflow.testing.PipelineScenario;
import java.time.Duration;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * What the audit makes of an id that came in more than once, with a dedup TTL of one hour, against
 * the real broker and database (records written as the job writes them, {@link JobRecords}): a
 * redelivery after the TTL is output again (a known limit) and a row that counts a redelivery
 * absorbed it, both reported apart and not problems; two outputs of records within the TTL, and a
 * row written more often than its id came in, stay problems.
 */
class AuditRedeliveriesTest {
    private static final long HOUR = Duration.ofHours(1).toMillis();

    private final PipelineScenario scenario = new PipelineScenario("redeliveries").withPostgres()
            .with("dedup.ttl", "1h");
    private final long threeHoursAgo = System.currentTimeMillis() - 3 * HOUR;
    private JobRecords job;

    @BeforeEach
    void writeTables() throws Exception {
        job = new JobRecords(scenario);
    }

    @AfterEach
    void closeProducer() {
        job.close();
    }

    @Test
    void aRedeliveryAfterTheTtlAndOneTheRowAbsorbedAreReportedApartNotAsProblems() throws Exception {
        RecordMetadata first = job.in("late-1", 0, threeHoursAgo);
        job.output("late-1", first, threeHoursAgo);
        // dedup forgot it: output again, two hours later
        job.output("late-1", job.in("late-1", 1, threeHoursAgo + 2 * HOUR), threeHoursAgo + 2 * HOUR);
        job.row("late-1", first, 2);
        RecordMetadata absorbed = job.in("absorbed-1", 0, threeHoursAgo);
        job.in("absorbed-1", 0, threeHoursAgo + 2 * HOUR);
        job.output("absorbed-1", absorbed); // its second output is gone (say, compacted): the row counts both
        job.row("absorbed-1", absorbed, 2);
        for (long recordTime : new long[] {threeHoursAgo, threeHoursAgo + 2 * HOUR}) {
            job.deadLetter("dropped-1".getBytes(UTF_8), DeadLetterReason.FILTERED_BY_PROCESSOR,
                    job.in("dropped-1", 0, recordTime), recordTime);
        }

        AuditReport report = scenario.audit();

        assertThat(report.problems()).isEmpty();
        assertThat(report.redeliveredAfterTtl()).isEqualTo(2);
        assertThat(report.absorbedRedeliveries()).isEqualTo(1);
        assertThat(report.filteredIds()).as("filtered twice is still one outcome").isEqualTo(1);
        assertThat(report.toText()).contains("redeliveries (not problems)\n",
                "  absorbed by the row       1, e.g. [absorbed-1 x2] (one output, deliveries > 1)\n",
                "  after dedup.ttl (1h)      2, e.g. [");
        assertThat(report.toText().lines().filter(line -> line.startsWith("  after dedup.ttl")).findFirst().orElseThrow())
                .contains("late-1 x2", "dropped-1 x2");
        assertThat(report.toJson()).contains("\"absorbed\" : {\n      \"count\" : 1,", "\"dedupTtlSeconds\" : 3600");
    }

    @Test
    void twoOutputsOfRecordsWithinTheTtlAreADuplicate() throws Exception {
        RecordMetadata first = job.in("close-1", 0, threeHoursAgo);
        job.output("close-1", first);
        job.output("close-1", job.in("close-1", 1, threeHoursAgo + HOUR / 2));
        job.row("close-1", first, 2);

        AuditReport report = scenario.audit();

        assertThat(report.problems()).containsExactly(
                "1 ids more than once in the output topic (from records within dedup.ttl), e.g. [close-1 x2]");
        assertThat(report.redeliveredAfterTtl()).isZero();
        assertThat(report.absorbedRedeliveries()).isZero();
    }

    /**
     * Record times are the producer's: an upstream that stamps its records with an event time (or a
     * replay tool that keeps the original times) makes two deliveries of one id, both within the TTL
     * in the job's processing time, look hours apart. Dedup should have dropped the second; that the
     * job output it twice is a real duplicate (e.g. dedup state lost in a restore), not a redelivery
     * after the TTL: both outputs were written a moment apart.
     */
    @Test
    void aDuplicateWrittenWithinTheTtlIsNotExcusedByProducerSetRecordTimesFarApart() throws Exception {
        RecordMetadata first = job.in("stamped-1", 0, threeHoursAgo);
        job.output("stamped-1", first);
        job.output("stamped-1", job.in("stamped-1", 1, threeHoursAgo + 2 * HOUR));
        job.row("stamped-1", first, 2);
        for (long recordTime : new long[] {threeHoursAgo, threeHoursAgo + 2 * HOUR}) {
            job.deadLetter("stamped-2".getBytes(UTF_8), DeadLetterReason.FILTERED_BY_PROCESSOR,
                    job.in("stamped-2", 0, recordTime));
        }

        AuditReport report = scenario.audit();

        assertThat(report.redeliveredAfterTtl()).as("written a moment apart: dedup still knew the ids").isZero();
        assertThat(report.problems()).containsExactly(
                "1 ids more than once in the output topic (from records within dedup.ttl), e.g. [stamped-1 x2]",
                "1 ids dead-lettered or filtered by the processor more than once (from records within dedup.ttl),"
                        + " e.g. [stamped-2 x2]");
    }

    @Test
    void aRowWrittenMoreOftenThanItsIdCameInIsAReplay() throws Exception {
        RecordMetadata once = job.in("replayed-1");
        job.output("replayed-1", once);
        job.row("replayed-1", once, 2);

        AuditReport report = scenario.audit();

        assertThat(report.problems()).containsExactly("1 rows delivered more often than their id came in the input"
                + " (input replayed into the sink, e.g. from an older checkpoint), e.g. [replayed-1 x2 (1 input records)]");
        assertThat(report.absorbedRedeliveries()).isZero();
    }
}
