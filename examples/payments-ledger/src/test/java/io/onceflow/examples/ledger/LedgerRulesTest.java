package io.onceflow.examples.ledger;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.onceflow.testkit.OnceflowTestKit;
import io.onceflow.testkit.Outcomes;
import io.onceflow.testkit.TestRecord;
import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The ledger's rules, each on accounts opened small enough for it to matter, through the whole job
 * (onceflow's test kit: real broker, real PostgreSQL, MiniCluster): insufficient funds, order (two
 * payments on one account whose sum exceeds its balance, in one partition: the first in source order
 * applies, the second is rejected), fees (debited with the payment, credited to the fee account by a
 * journal line, never a balance row), transfers (applied, short of funds, to an unknown account, to itself), exact
 * money (more than two decimals is rejected, never rounded), and the currency checked by the
 * database against the account's own, after {@link PaymentScreening} let a rouble payment through;
 * an order applied with no change, an unknown type rejected. Rejections change nothing, the journal
 * matches the balances, and a message posted a second time fails on the journal's key.
 */
class LedgerRulesTest {
    private static final String ACCOUNTS = "INSERT INTO ledger.accounts (id, opening_balance, balance, currency) VALUES"
            + " (1, 5.00, 5.00, 'RUB'), (2, 100.00, 100.00, 'RUB'), (3, 100.00, 100.00, 'RUB'),"
            + " (4, 20.00, 20.00, 'RUB'), (5, 100.00, 100.00, 'USD')";

    private final List<TestRecord> records = new ArrayList<>();

    @Test
    void theLedgersRulesDecideEachMessageOnce() throws Exception {
        add("short", payment(1, "10.00"));
        // one key, so one partition: the sink applies a partition's messages in source order, whatever
        // their ids (these sort the other way round)
        add("z-first", "account-2", payment(2, "70.00"));
        add("a-second", "account-2", payment(2, "50.00"));
        add("transfer", transfer(3, 4, "30.00"));
        add("transfer-back", transfer(4, 3, "10.00"));
        add("transfer-short", transfer(3, 4, "1000.00"));
        add("transfer-unknown", transfer(3, 99, "1.00"));
        add("transfer-to-itself", transfer(3, 3, "1.00"));
        add("half-kopeck", payment(3, "10.005"));
        add("exact", payment(3, "10.50"));
        add("negative", payment(3, "-1.00"));
        add("into-a-dollar-account", payment(5, "1.00"));
        add("with-fee", withFee(payment(4, "5.00"), "\"0.25\""));
        add("fee-too-fine", withFee(payment(4, "1.00"), "\"0.001\""));
        add("fee-beyond-funds", withFee(payment(1, "5.00"), "0.01")); // 5.00 is all account 1 has
        add("an-order", "{\"type\":\"order\",\"order_id\":\"ord-1\",\"total\":5.00}");
        add("a-refund", "{\"type\":\"refund\",\"user_id\":3,\"amount\":1.00,\"currency\":\"RUB\"}");

        Outcomes outcomes = OnceflowTestKit.start().job(new PaymentScreening())
                .withSql(LedgerChecks.resource("db/ledger.sql"), ACCOUNTS)
                .withEffect("ledger.apply_payment").with("postgres.effect.keys", "ledger.payment_accounts")
                .with("parallelism", "1")
                .run(records);

        outcomes.assertExactlyOnce();
        assertRejected(outcomes, "short", "insufficient funds");
        assertApplied(outcomes, "z-first");
        assertRejected(outcomes, "a-second", "insufficient funds");
        assertApplied(outcomes, "transfer");
        assertApplied(outcomes, "transfer-back");
        assertRejected(outcomes, "transfer-short", "insufficient funds");
        assertRejected(outcomes, "transfer-unknown", "unknown account");
        assertRejected(outcomes, "transfer-to-itself", "same account");
        assertRejected(outcomes, "half-kopeck", "amount has more than two decimals");
        assertApplied(outcomes, "exact");
        assertRejected(outcomes, "negative", "invalid amount");
        assertRejected(outcomes, "into-a-dollar-account", "currency not kept by the account");
        assertApplied(outcomes, "with-fee");
        assertRejected(outcomes, "fee-too-fine", "fee has more than two decimals");
        assertRejected(outcomes, "fee-beyond-funds", "insufficient funds");
        assertApplied(outcomes, "an-order");
        assertRejected(outcomes, "a-refund", "unknown type");
        try (Connection ledger = outcomes.connect()) {
            assertThat(LedgerChecks.balances(ledger)).isEqualTo(Map.of(1L, new BigDecimal("5.00"),
                    2L, new BigDecimal("30.00"), 3L, new BigDecimal("69.50"), 4L, new BigDecimal("34.75"),
                    5L, new BigDecimal("100.00")));
            assertThat(LedgerChecks.journalProblems(ledger)).isEmpty();
            assertThat(LedgerChecks.journalLines(ledger)).isEqualTo(
                    Map.of("z-first", 2L, "transfer", 2L, "transfer-back", 2L, "exact", 2L, "with-fee", 3L));
            // the payments' other side: the outside world (account 0), a line per payment, no balance row
            assertThat(outcomes.query("SELECT sum(amount) FROM ledger.journal WHERE account = 0")).containsExactly("85.50");
            // the fee account: a journal line per fee, its balance derived, no row any effect updates
            assertThat(outcomes.query("SELECT sum(amount) FROM ledger.journal WHERE account = ledger.fee_account()"))
                    .containsExactly("0.25");
            assertThat(outcomes.query("SELECT count(*) FROM ledger.accounts WHERE id = ledger.fee_account()"))
                    .containsExactly("0");
            assertThat(outcomes.query("SELECT count(*) FROM ledger.journal WHERE posted_at IS NULL")).containsExactly("0");
        }
        // a second posting of a message, by whatever path, fails loudly and moves nothing
        assertThatThrownBy(() -> outcomes.query("SELECT ledger.apply_payment('exact', '" + payment(3, "10.50") + "')"))
                .isInstanceOf(SQLException.class).hasMessageContaining("journal_message_id_account_leg_key");
        assertThat(outcomes.query("SELECT balance FROM ledger.accounts WHERE id = 3")).containsExactly("69.50");
    }

    /** {@code json} (an object) with a {@code fee} field of {@code fee} (JSON text). */
    private static String withFee(String json, String fee) {
        return json.substring(0, json.length() - 1) + ",\"fee\":" + fee + "}";
    }

    private static void assertApplied(Outcomes outcomes, String id) {
        assertThat(outcomes.rowOf(id).result()).as(id).contains("\"status\": \"applied\"");
    }

    private static void assertRejected(Outcomes outcomes, String id, String reason) {
        assertThat(outcomes.rowOf(id).result()).as(id).contains("\"status\": \"rejected\"")
                .contains("\"reason\": \"" + reason + "\"");
    }

    private void add(String id, String json) {
        records.add(TestRecord.of(id, json));
    }

    /** A record of {@code id} with {@code key} as its Kafka key (the partition) instead of the id. */
    private void add(String id, String key, String json) {
        records.add(TestRecord.raw(id, key.getBytes(UTF_8), json.getBytes(UTF_8), Map.of("message-id", id.getBytes(UTF_8))));
    }

    private static String payment(long account, String amount) {
        return "{\"type\":\"payment\",\"user_id\":" + account + ",\"amount\":" + amount + ",\"currency\":\"RUB\"}";
    }

    private static String transfer(long from, long to, String amount) {
        return "{\"type\":\"transfer\",\"transfer_from\":" + from + ",\"transfer_to\":" + to + ",\"amount\":\"" + amount
                + "\",\"currency\":\"RUB\"}";
    }
}
