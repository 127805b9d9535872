package io.onceflow.examples.ledger;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.json.JsonMapper;
import io.onceflow.testkit.OnceflowTestKit;
import io.onceflow.testkit.Outcomes;
import io.onceflow.testkit.TestRecord;
import java.math.BigDecimal;
import java.sql.Connection;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;

/**
 * The example's job, with onceflow's test kit, on a real broker, a real PostgreSQL and a
 * MiniCluster: payments and transfers in roubles between open accounts and to one that was never
 * opened, orders, payments in dollars, redeliveries, poison and a record without an id, and a crash
 * of the job mid-run. Each dollar payment is dead-lettered once by {@link PaymentScreening}; every
 * other event is output once and applied once by {@code ledger.apply_payment}, so each balance is
 * its opening balance less that account's unique rouble payments and transfers out, plus its
 * transfers in, to the cent, and the journal agrees. Every account opens with plenty, so no outcome
 * depends on the order payments meet ({@link LedgerRulesTest} has the ones that do).
 */
class PaymentsLedgerTest {
    private static final JsonMapper JSON =
            JsonMapper.builder().enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS).build();
    private static final BigDecimal OPENING = new BigDecimal("1000000.00");
    private static final int ACCOUNTS = 40;
    /** Never opened: payments to it are rejected by the effect function as "unknown account". */
    private static final long UNKNOWN_ACCOUNT = ACCOUNTS + 1;
    private static final int PAYMENTS = 2_500;
    /** Every fifth of the {@value #PAYMENTS} messages is a transfer between two accounts instead. */
    private static final int TRANSFER_EVERY = 5;
    private static final int ORDERS = 300;
    private static final int FOREIGN_PAYMENTS = 25;
    private static final int POISON = 20;

    private final List<TestRecord> records = new ArrayList<>();
    /** Per id, the JSON sent, which is also the output expected. */
    private final Map<String, String> roublePayments = new HashMap<>();
    private final Map<String, String> orders = new HashMap<>();
    /** What the unique rouble payments and transfers move, per account: negative out, positive in. */
    private final Map<Long, BigDecimal> movedByAccount = new TreeMap<>();

    @Test
    void everyPaymentIsAppliedOnceAndForeignCurrenciesAreDeadLettered() throws Exception {
        Random random = new Random(5);
        for (int i = 0; i < PAYMENTS; i++) {
            long account = 1 + random.nextInt(ACCOUNTS + 1);
            BigDecimal amount = BigDecimal.valueOf(1 + random.nextInt(100_000), 2);
            if (i % TRANSFER_EVERY == 0) {
                long to = 1 + (account + random.nextInt(ACCOUNTS - 1)) % ACCOUNTS;
                roublePayments.put("pay-" + i, add("pay-" + i, transfer("pay-" + i, account, to, amount)));
                if (account != UNKNOWN_ACCOUNT) {
                    movedByAccount.merge(account, amount.negate(), BigDecimal::add);
                    movedByAccount.merge(to, amount, BigDecimal::add);
                }
            } else {
                roublePayments.put("pay-" + i, add("pay-" + i, payment("pay-" + i, account, amount, "RUB")));
                if (account != UNKNOWN_ACCOUNT) {
                    movedByAccount.merge(account, amount.negate(), BigDecimal::add);
                }
            }
        }
        for (int i = 0; i < ORDERS; i++) {
            orders.put("order-" + i, add("order-" + i, "{\"id\":\"order-" + i + "\",\"type\":\"order\",\"user_id\":"
                    + (i % ACCOUNTS + 1) + ",\"amount\":99.90}"));
        }
        for (int i = 0; i < FOREIGN_PAYMENTS; i++) {
            add("usd-" + i, payment("usd-" + i, i % ACCOUNTS + 1, new BigDecimal("10.00"), "USD"));
        }
        for (int i = 0; i < POISON; i++) {
            records.add(TestRecord.raw("poison-" + i, null, ("{\"id\":\"poison-" + i).getBytes(UTF_8),
                    Map.of("message-id", ("poison-" + i).getBytes(UTF_8))));
        }
        records.add(TestRecord.raw("no-id", null, "{\"type\":\"order\"}".getBytes(UTF_8), Map.of()));
        List<TestRecord> redeliveries = new ArrayList<>();
        for (int i = 0; i < records.size(); i += 10) {
            redeliveries.add(records.get(i));
        }
        records.addAll(redeliveries);

        Outcomes outcomes = OnceflowTestKit.start().job(new PaymentScreening())
                .withSql(LedgerChecks.resource("db/ledger.sql"), "INSERT INTO ledger.accounts (id, opening_balance, balance)"
                        + " SELECT id, " + OPENING + ", " + OPENING + " FROM generate_series(1, " + ACCOUNTS + ") id")
                .withEffect("ledger.apply_payment").with("postgres.effect.keys", "ledger.payment_accounts")
                .withEffectResults()
                .failOnceAfter(1_000)
                .run(records);

        outcomes.assertExactlyOnce();
        for (Map.Entry<String, String> payment : roublePayments.entrySet()) {
            String id = payment.getKey();
            assertThat(outcomes.outputOf(id)).isEqualTo(payment.getValue());
            Outcomes.Row row = outcomes.rowOf(id);
            assertThat(row.deliveries()).as(id).isEqualTo(1);
            JsonNode sent = JSON.readTree(payment.getValue());
            JsonNode result = JSON.readTree(row.result());
            assertThat(outcomes.publishedOutcomeOf(id)).as(id).isEqualTo(result.path("status").asText());
            if (sent.path(sent.has("user_id") ? "user_id" : "transfer_from").asLong() == UNKNOWN_ACCOUNT) {
                assertThat(result.path("status").asText()).as(id).isEqualTo("rejected");
                assertThat(result.path("reason").asText()).as(id).isEqualTo("unknown account");
            } else {
                assertThat(result.path("status").asText()).as(id).isEqualTo("applied");
                assertThat(result.path("amount").decimalValue()).as(id).isEqualByComparingTo(new BigDecimal(sent.get("amount").asText()));
            }
        }
        for (Map.Entry<String, String> order : orders.entrySet()) {
            assertThat(outcomes.outputOf(order.getKey())).isEqualTo(order.getValue());
            assertThat(outcomes.rowOf(order.getKey()).result()).isEqualTo("{\"change\": \"none\", \"status\": \"applied\"}");
        }
        for (int i = 0; i < FOREIGN_PAYMENTS; i++) {
            Outcomes.DeadLetter deadLetter = outcomes.deadLetterOf("usd-" + i);
            assertThat(deadLetter.reason()).isEqualTo("REJECTED_BY_PROCESSOR");
            assertThat(deadLetter.error()).contains("no account in currency 'USD'");
        }
        for (int i = 0; i < POISON; i++) {
            assertThat(outcomes.deadLetterOf("poison-" + i).reason()).isEqualTo("MALFORMED_JSON");
        }
        Set<String> accepted = new HashSet<>(roublePayments.keySet());
        accepted.addAll(orders.keySet());
        assertThat(outcomes.outputIds()).isEqualTo(accepted);
        assertThat(outcomes.rowIds()).isEqualTo(accepted);
        assertThat(outcomes.deadLetterOf("no-id").reason()).isEqualTo("MISSING_ID");
        assertThat(outcomes.deadLetterLabels()).hasSize(FOREIGN_PAYMENTS + POISON + 1);

        Map<Long, BigDecimal> expected = new TreeMap<>();
        for (long account = 1; account <= ACCOUNTS; account++) {
            expected.put(account, OPENING.add(movedByAccount.getOrDefault(account, BigDecimal.ZERO)));
        }
        try (Connection ledger = outcomes.connect()) {
            assertThat(LedgerChecks.balances(ledger)).isEqualTo(expected);
            assertThat(LedgerChecks.journalProblems(ledger)).isEmpty();
            Map<String, Long> journalLines = LedgerChecks.journalLines(ledger);
            for (String id : accepted) {
                boolean applied = outcomes.rowOf(id).result().contains("\"status\": \"applied\"")
                        && !orders.containsKey(id);
                assertThat(journalLines.getOrDefault(id, 0L)).as(id).isEqualTo(applied ? 2 : 0);
            }
        }
    }

    /** Adds a record of {@code id} with {@code json} as its value; returns the JSON, the output expected. */
    private String add(String id, String json) {
        records.add(TestRecord.of(id, json));
        return json;
    }

    private static String payment(String id, long account, BigDecimal amount, String currency) {
        return "{\"id\":\"" + id + "\",\"type\":\"payment\",\"user_id\":" + account + ",\"amount\":" + amount
                + ",\"currency\":\"" + currency + "\"}";
    }

    private static String transfer(String id, long from, long to, BigDecimal amount) {
        return "{\"id\":\"" + id + "\",\"type\":\"transfer\",\"transfer_from\":" + from + ",\"transfer_to\":" + to
                + ",\"amount\":\"" + amount + "\",\"currency\":\"RUB\"}";
    }
}
