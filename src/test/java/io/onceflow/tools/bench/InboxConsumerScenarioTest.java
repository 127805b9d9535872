package io.onceflow.tools.bench;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.onceflow.tools.generator.EventGenerator;
import java.util.List;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.junit.jupiter.api.Test;

/** How the hand-written inbox takes a poll's records into its transaction: {@link InboxConsumerScenario.Batch}. */
class InboxConsumerScenarioTest {
    private static long offset;

    private static ConsumerRecord<byte[], byte[]> record(String id, String payload) {
        ConsumerRecord<byte[], byte[]> record =
                new ConsumerRecord<>("in", 0, offset++, id.getBytes(UTF_8), payload.getBytes(UTF_8));
        record.headers().add(new RecordHeader(EventGenerator.ID_HEADER, id.getBytes(UTF_8)));
        return record;
    }

    private static String payment(String id, int account) {
        return "{\"id\":\"" + id + "\",\"type\":\"payment\",\"user_id\":" + account + ",\"amount\":1.00}";
    }

    @Test
    void keepsTheFirstRecordOfEachIdSortedByAccountWithOrdersFirst() {
        InboxConsumerScenario.Batch batch = InboxConsumerScenario.Batch.of(List.of(
                record("a", payment("a", 30)),
                record("b", payment("b", 10)),
                record("o", "{\"id\":\"o\",\"type\":\"order\",\"customer_id\":5}"),
                record("a", payment("a", 30)),
                record("c", payment("c", 30)),
                record("d", payment("d", 10))));

        // account order between the threads; poll order within an account
        assertThat(batch.ids()).containsExactly("o", "b", "d", "a", "c");
        assertThat(batch.payloads()[1]).isEqualTo(payment("b", 10));
    }

    @Test
    void withoutTheIdsAlreadyInTheInboxKeepsTheOrderOfTheRest() {
        InboxConsumerScenario.Batch batch = InboxConsumerScenario.Batch.of(List.of(
                record("a", payment("a", 1)), record("b", payment("b", 2)), record("c", payment("c", 3))));

        InboxConsumerScenario.Batch fresh = batch.without(Set.of("b"));

        assertThat(fresh.ids()).containsExactly("a", "c");
        assertThat(fresh.payloads()).containsExactly(payment("a", 1), payment("c", 3));
    }

    @Test
    void refusesARecordWithoutAnId() {
        ConsumerRecord<byte[], byte[]> noId = new ConsumerRecord<>("in", 0, 0, null, "{}".getBytes(UTF_8));

        assertThatThrownBy(() -> InboxConsumerScenario.Batch.of(List.of(noId)))
                .isInstanceOf(IllegalStateException.class);
    }
}
