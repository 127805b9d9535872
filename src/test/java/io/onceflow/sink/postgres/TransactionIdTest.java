package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.internal.TransactionId;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.NullAndEmptySource;
import org.junit.jupiter.params.provider.ValueSource;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;


class TransactionIdTest {
    @Test
    void encodesEveryPartAndParsesBack() {
        TransactionId id = new TransactionId("orders_pg", 7731, 3, 42);

        assertThat(id.encode()).isEqualTo("onceflow:orders_pg:e7731:s3:c42");
        assertThat(TransactionId.parse(id.encode())).contains(id);
        assertThat(TransactionId.parse(id.encode(), "orders_pg")).contains(id);
    }

    @Test
    void extremeValuesFitAndRoundTrip() {
        TransactionId id = new TransactionId("p".repeat(40), Long.MAX_VALUE, Integer.MAX_VALUE, Long.MAX_VALUE);

        assertThat(TransactionId.parse(id.encode())).contains(id);
        assertThat(id.encode().length()).as("PostgreSQL gids are at most 200 bytes").isLessThan(200);
    }

    @Test
    void aPrefixNeverMatchesAnotherPrefixThatStartsLikeIt() {
        String gidOfJob2 = new TransactionId("job2", 1, 0, 1).encode();
        String gidOfJob = new TransactionId("job", 1, 0, 1).encode();

        assertThat(TransactionId.parse(gidOfJob2, "job")).isEmpty();
        assertThat(TransactionId.parse(gidOfJob, "job2")).isEmpty();
        assertThat(TransactionId.parse(gidOfJob, "jo")).isEmpty();
        assertThat(TransactionId.parse(gidOfJob, "JOB")).isEmpty();
        assertThat(TransactionId.parse(gidOfJob, "job")).isPresent();
    }

    @ParameterizedTest
    @NullAndEmptySource
    @ValueSource(strings = {
            "xa-branch-17", // another application
            "onceflow:job", // truncated
            "onceflow:job:e1:s0", // no checkpoint
            "onceflow:job:e1:s0:c1:x", // trailing text
            "onceflow:job:e1:s0:c1 ", // trailing space
            "ONCEFLOW:job:e1:s0:c1", // other namespace
            "onceflow:jo-b:e1:s0:c1", // prefix character not allowed
            "onceflow:job:e01:s0:c1", // not canonical
            "onceflow:job:e1:s00:c1", // not canonical
            "onceflow:job:e1:s0:c-1", // negative
            "onceflow:job:e1:s9999999999:c1", // subtask overflows int
            "onceflow:job:e99999999999999999999:s0:c1", // too many digits
            "onceflow:job:e9999999999999999999:s0:c1", // 19 digits, overflows long
            "onceflow:job:e1:s0:c1'; DROP TABLE x; --"})
    void parsingAForeignOrMalformedGidIsEmptyNotAnError(String gid) {
        assertThat(TransactionId.parse(gid)).isEmpty();
        assertThat(TransactionId.parse(gid, "job")).isEmpty();
    }

    @ParameterizedTest
    @NullAndEmptySource
    @ValueSource(strings = {"job-1", "job:1", "job'", "a b", "0123456789012345678901234567890123456789x"})
    void rejectsAnInvalidPrefix(String prefix) {
        assertThatThrownBy(() -> new TransactionId(prefix, 1, 0, 1))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("sink prefix");
    }

    @Test
    void rejectsNegativeNumbers() {
        assertThatThrownBy(() -> new TransactionId("job", -1, 0, 1)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new TransactionId("job", 1, -1, 1)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new TransactionId("job", 1, 0, -1)).isInstanceOf(IllegalArgumentException.class);
    }
}
