package io.onceflow.examples.ledger;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.onceflow.api.Event;
import io.onceflow.api.EventProcessor;
import io.onceflow.api.EventRejectedException;
import java.io.IOException;
import java.util.Set;
import org.apache.flink.util.Collector;

/**
 * The ledger's business rule in Java, before the database sees a payment: only payments and
 * transfers in a currency the ledger keeps pass on; any other is rejected, and onceflow sends it to
 * the dead-letter topic with reason {@code REJECTED_BY_PROCESSOR} and this message, exactly once.
 * Orders and other events pass unchanged. Deterministic in the event, as an {@link EventProcessor}
 * must be.
 *
 * <p>This is an early filter, not the guard: {@code ledger.apply_payment} checks the currency again
 * against each account's own, which only the database knows (db/ledger.sql).
 */
public final class PaymentScreening implements EventProcessor {
    private static final long serialVersionUID = 1L;
    private static final ObjectMapper JSON = new ObjectMapper();
    static final Set<String> CURRENCIES = Set.of("RUB");
    private static final Set<String> MONEY_MOVES = Set.of("payment", "transfer");

    @Override
    public void flatMap(Event event, Collector<Event> out) throws IOException {
        JsonNode payload = JSON.readTree(event.payload);
        if (MONEY_MOVES.contains(payload.path("type").asText())) {
            String currency = payload.path("currency").asText();
            if (!CURRENCIES.contains(currency)) {
                throw new EventRejectedException("the ledger keeps no account in currency '" + currency + "'");
            }
        }
        out.collect(event);
    }
}
