package io.onceflow.api;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.math.BigDecimal;
import org.junit.jupiter.api.Test;

/** An enrichment (read, add a field, write) keeps every number of the payload as it was written. */
class PayloadsTest {
    private static final String PAYMENT =
            "{\"amount\":10.00,\"refund\":-0.50,\"total\":123456789012345678901234567890.1234,\"count\":12345678901234567890}";

    private static String enriched(JsonMapper json) throws Exception {
        ObjectNode payment = (ObjectNode) json.readTree(PAYMENT);
        payment.put("fee", payment.get("amount").decimalValue().multiply(new BigDecimal("0.025")));
        return json.writeValueAsString(payment);
    }

    @Test
    void numbersSurviveEnrichmentAsWritten() throws Exception {
        assertThat(enriched(Payloads.jsonMapper())).isEqualTo(
                "{\"amount\":10.00,\"refund\":-0.50,\"total\":123456789012345678901234567890.1234,"
                        + "\"count\":12345678901234567890,\"fee\":0.25000}");
    }

    /** Why the mapper exists: big decimals alone (the earlier README's mapper) turn 10.00 into 1E+1. */
    @Test
    void bigDecimalsAloneDoNot() throws Exception {
        JsonMapper bigDecimalsOnly = JsonMapper.builder().enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS).build();

        assertThat(enriched(bigDecimalsOnly)).startsWith("{\"amount\":1E+1,\"refund\":-0.5,");
    }

    @Test
    void eachCallGivesAMapperOfItsOwn() {
        assertThat(Payloads.jsonMapper()).isNotSameAs(Payloads.jsonMapper());
    }
}
