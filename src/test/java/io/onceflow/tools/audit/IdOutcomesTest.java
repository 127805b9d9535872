package io.onceflow.tools.audit;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** The classification of each id's counts into one outcome, and the dedup TTL's rule, without services. */
class IdOutcomesTest {
    private static final Duration TTL = Duration.ofSeconds(10);

    @Test
    void recordsAreARedeliveryAfterTheTtlOnlyWhenEachIsFartherThanItFromTheNext() {
        assertThat(IdOutcomes.fartherApartThan(List.of(0L, 10_001L), TTL)).isTrue();
        assertThat(IdOutcomes.fartherApartThan(List.of(20_002L, 0L, 10_001L), TTL)).as("in any order").isTrue();
        assertThat(IdOutcomes.fartherApartThan(List.of(0L, 10_000L), TTL)).as("exactly the TTL: within").isFalse();
        assertThat(IdOutcomes.fartherApartThan(List.of(0L, 5L, 30_000L), TTL)).as("one pair within").isFalse();
        assertThat(IdOutcomes.fartherApartThan(List.of(7L, 7L), TTL)).as("the same record twice").isFalse();
        assertThat(IdOutcomes.fartherApartThan(List.of(7L), TTL)).as("one record is no redelivery").isFalse();
    }

    @Test
    void aRedeliveryAfterTheTtlNeedsTheOutputsWrittenApartAsWellAsTheirRecords() {
        assertThat(IdOutcomes.redeliveredAfter(List.of(0L, 20_000L), List.of(1L, 20_001L), TTL)).isTrue();
        assertThat(IdOutcomes.redeliveredAfter(List.of(0L, 20_000L), List.of(1L, 2L), TTL))
                .as("record times set by a producer far apart, written a moment apart: a duplicate").isFalse();
        assertThat(IdOutcomes.redeliveredAfter(List.of(5L, 5L), List.of(1L, 20_001L), TTL))
                .as("the same record written twice, far apart: a replay").isFalse();
    }

    @Test
    void idsWithNoCoveredRecordAreForgottenWithTheirDeadLetters() {
        IdOutcomes ids = new IdOutcomes();
        ids.accepted("covered", true);
        ids.accepted("covered", false);
        ids.accepted("after-the-bound", false);
        ids.processorDeadLetter("after-the-bound", "FILTERED_BY_PROCESSOR", 1L, 1L);

        assertThat(ids.forgetUncovered()).isEqualTo(new IdOutcomes.Forgotten(1, 1));
        assertThat(ids.isAudited("covered")).isTrue();
        assertThat(ids.records("covered")).as("its records after the bound still count").isEqualTo(2);
        assertThat(ids.deadLettered()).isEmpty();
    }

    @Test
    void eachIdGetsOneOutcome() {
        IdOutcomes ids = new IdOutcomes();
        for (String id : List.of("out", "filtered", "rejected", "lost", "both", "twice")) {
            ids.accepted(id, true);
        }
        ids.output("out");
        ids.processorDeadLetter("filtered", "FILTERED_BY_PROCESSOR", 1L, 1L);
        ids.processorDeadLetter("rejected", "REJECTED_BY_PROCESSOR", 1L, 1L);
        ids.output("both");
        ids.processorDeadLetter("both", "FILTERED_BY_PROCESSOR", 1L, 1L);
        ids.output("twice");
        ids.output("twice");
        AuditReport report = new AuditReport(AuditScope.wholeTopics(), TTL);

        ids.classify(report, Set.of("twice"), TTL);

        assertThat(report.outputIds.examples).containsExactlyInAnyOrder("out", "twice");
        assertThat(report.filteredIds.examples).containsExactly("filtered");
        assertThat(report.processorDeadLetters.get("REJECTED_BY_PROCESSOR").examples).containsExactly("rejected");
        assertThat(report.missingIds.examples).containsExactly("lost");
        assertThat(report.outputAndDeadLetterIds.examples).containsExactly("both");
        assertThat(report.redeliveredAfterTtl.examples).containsExactly("twice x2");
        assertThat(report.duplicatedIds.count).isZero();
        assertThat(ids.rowExpected(Set.of())).containsExactlyInAnyOrder("out", "lost", "twice");
    }
}
