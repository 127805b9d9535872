package io.onceflow.testkit;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.onceflow.api.Event;
import io.onceflow.api.EventProcessor;
import io.onceflow.api.EventRejectedException;
import io.onceflow.api.Payloads;
import io.onceflow.sink.kafka.OnceflowHeaders;
import java.io.IOException;
import java.math.BigDecimal;
import java.util.Map;
import org.apache.flink.util.Collector;
import org.junit.jupiter.api.Test;

/**
 * The kit on one small run of a wrong processor: it reports each id's outcome (output, dead letter
 * with its reason, a filtered event's record, row with the effect's result) and catches the id the
 * processor emits twice; and on
 * the README's enriching processor, whose numbers reach the output as written.
 */
class OnceflowTestKitIT {
    private static final String EFFECT = "CREATE FUNCTION kit_effect(message_id text, payload jsonb) RETURNS jsonb"
            + " LANGUAGE sql AS $$ SELECT jsonb_build_object('status', 'applied', 'id', message_id) $$";

    /** Rejects ids starting with "reject", drops "drop-" ids, emits "dup-" ids twice (the bug), passes the rest. */
    static final class EmitsDuplicates implements EventProcessor {
        private static final long serialVersionUID = 1L;

        @Override
        public void flatMap(Event event, Collector<Event> out) {
            if (event.messageId.startsWith("reject")) {
                throw new EventRejectedException("no " + event.messageId + " here");
            }
            if (event.messageId.startsWith("drop-")) {
                return; // filtered: emits nothing
            }
            out.collect(event);
            if (event.messageId.startsWith("dup-")) {
                out.collect(event);
            }
        }
    }

    /** The README's processor, as written there: validates, then enriches with Payloads' mapper. */
    static final class PaymentProcessor implements EventProcessor {
        private static final long serialVersionUID = 1L;
        private static final JsonMapper JSON = Payloads.jsonMapper();
        private static final BigDecimal FEE_RATE = new BigDecimal("0.025");

        @Override
        public void flatMap(Event event, Collector<Event> out) throws IOException {
            if (!(JSON.readTree(event.payload) instanceof ObjectNode payment)) {
                throw new EventRejectedException("a payment is a JSON object");
            }
            JsonNode amount = payment.path("amount");
            if (!amount.isNumber() || amount.decimalValue().signum() < 0) {
                throw new EventRejectedException("amount must be a number >= 0");
            }
            payment.put("fee", amount.decimalValue().multiply(FEE_RATE));
            event.payload = JSON.writeValueAsBytes(payment);
            out.collect(event);
        }
    }

    @Test
    void theReadmesEnrichmentKeepsNumbersAsWritten() throws Exception {
        Outcomes outcomes = OnceflowTestKit.start().run(new PaymentProcessor(),
                TestRecord.of("pay-1", "{\"amount\": 10.00, \"refund\": -0.50}"),
                TestRecord.of("pay-2", "{\"amount\": -0.5}"));

        assertThat(outcomes.outputOf("pay-1")).isEqualTo("{\"amount\":10.00,\"refund\":-0.50,\"fee\":0.25000}");
        assertThat(outcomes.deadLetterOf("pay-2").reason()).isEqualTo("REJECTED_BY_PROCESSOR");
        outcomes.assertExactlyOnce();
    }

    @Test
    void reportsEachIdsOutcomeAndCatchesAnIdEmittedTwice() throws Exception {
        TestRecord ok = TestRecord.of("ok-1", "{\"amount\": 12345678901234567.89}");
        Outcomes outcomes = OnceflowTestKit.start().job(new EmitsDuplicates())
                .withSql(EFFECT).withEffect("kit_effect")
                .run(ok, ok, // a redelivery: still one outcome
                        TestRecord.of("reject-1", "{}"),
                        TestRecord.of("drop-1", "{}"),
                        TestRecord.of("dup-1", "{}"),
                        TestRecord.raw("not-json", null, "{oops".getBytes(UTF_8),
                                Map.of(OnceflowHeaders.MESSAGE_ID, "not-json".getBytes(UTF_8))));

        assertThat(outcomes.outputOf("ok-1")).isEqualTo("{\"amount\": 12345678901234567.89}");
        assertThat(outcomes.rowOf("ok-1")).isEqualTo(new Outcomes.Row("{\"amount\": 12345678901234567.89}", 1,
                "{\"id\": \"ok-1\", \"status\": \"applied\"}"));
        assertThat(outcomes.deadLetterOf("reject-1").reason()).isEqualTo("REJECTED_BY_PROCESSOR");
        assertThat(outcomes.deadLetterOf("reject-1").error()).contains("no reject-1 here");
        assertThat(outcomes.deadLetterOf("not-json").reason()).isEqualTo("MALFORMED_JSON");
        assertThat(outcomes.outputIds()).containsExactlyInAnyOrder("ok-1", "dup-1");
        assertThat(outcomes.deadLetterOf("drop-1")).as("a filtered event is recorded, without its payload")
                .isEqualTo(new Outcomes.DeadLetter("FILTERED_BY_PROCESSOR", "the processor emitted nothing for the event",
                        null));
        assertThat(outcomes.deadLetterLabels()).containsExactlyInAnyOrder("reject-1", "drop-1", "not-json");
        assertThat(outcomes.rowIds()).as("a filtered id has no row").doesNotContain("drop-1");

        assertThat(outcomes.problems()).containsExactlyInAnyOrder("id dup-1: 2 output records",
                "id dup-1: its row was delivered 2 times");
        assertThatThrownBy(outcomes::assertExactlyOnce).isInstanceOf(AssertionError.class)
                .hasMessageContaining("id dup-1: 2 output records");
        assertThatThrownBy(() -> outcomes.outputOf("dup-1")).isInstanceOf(AssertionError.class)
                .hasMessageContaining("2 output records, expected 1");
        assertThatThrownBy(() -> outcomes.outputOf("reject-1")).isInstanceOf(AssertionError.class)
                .hasMessageContaining("dead letter REJECTED_BY_PROCESSOR (");
    }
}
