package io.onceflow.testing;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.Header;

/**
 * The payments ledger of the demo and the tests: the example project's schema and effect function
 * ({@value #SQL_FILE}, the one file users copy), accounts to open, and the audit that the effect
 * happened exactly once per message id: every account's balance equals its opening balance less the
 * payments (and plus or less the transfers) the inbox (the event table) records as applied, to the
 * cent, and the double-entry journal agrees: each applied message's lines sum to zero, only applied
 * messages have lines, and each account's opening balance plus its lines is its balance.
 *
 * <p>Accounts are opened for the generator's user ids 1..{@code accounts}, except every
 * {@value #UNKNOWN_EVERY}th (payments to them are rejected as "unknown account"); every
 * {@value #SMALL_EVERY}th opens with a small balance, so some payments are rejected for
 * "insufficient funds". Which ones depends on the order payments meet, which is why the audit
 * checks balances against the recorded results, and {@link #expectedBalances} is for inputs where
 * no payment can be short of funds.
 */
public final class Ledger {
    public static final String FUNCTION = "ledger.apply_payment";
    /** The accounts each payment or transfer changes ({@code postgres.effect.keys}). */
    public static final String KEYS = "ledger.payment_accounts";
    private static final ObjectMapper JSON = new ObjectMapper()
            .enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS);
    static final String SQL_FILE = "examples/payments-ledger/src/main/resources/db/ledger.sql";
    public static final int UNKNOWN_EVERY = 20;
    public static final int SMALL_EVERY = 7;

    private Ledger() {}

    /** Creates the schema, the accounts table and the effect function (idempotent). */
    public static void install(Connection connection) throws SQLException {
        install(connection, sql());
    }

    /** As {@link #install(Connection)}, from the text of {@code ledger.sql} (e.g. a resource of the example's). */
    public static void install(Connection connection, String ledgerSql) throws SQLException {
        try (Statement statement = connection.createStatement()) {
            statement.execute(ledgerSql);
        }
    }

    private static String sql() {
        try {
            return Files.readString(Path.of(SQL_FILE), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException("the ledger's SQL is read from " + SQL_FILE
                    + " relative to the project directory", e);
        }
    }

    /**
     * Opens accounts 1..{@code accounts} (but every {@value #UNKNOWN_EVERY}th) with {@code balance},
     * or a balance of 1.00 for every {@value #SMALL_EVERY}th when {@code someShortOfFunds}.
     */
    public static void openAccounts(Connection connection, int accounts, BigDecimal balance, boolean someShortOfFunds)
            throws SQLException {
        try (PreparedStatement open = connection.prepareStatement("INSERT INTO ledger.accounts (id, opening_balance, balance)"
                + " SELECT id, b, b FROM (SELECT id, CASE WHEN ? AND id % " + SMALL_EVERY + " = 0 THEN 1.00 ELSE ? END AS b"
                + " FROM generate_series(1, ?) id WHERE id % " + UNKNOWN_EVERY + " <> 0) opening"
                + " ON CONFLICT (id) DO NOTHING")) {
            open.setBoolean(1, someShortOfFunds);
            open.setBigDecimal(2, balance);
            open.setInt(3, accounts);
            open.executeUpdate();
        }
    }

    /**
     * The balances that the unique payments of an input leave when none can be short of funds: per
     * known account, the opening balance less the sum of its payments.
     *
     * @param paymentsByAccount the sum of the unique payments' amounts per account (user id)
     */
    public static Map<Long, BigDecimal> expectedBalances(Connection connection, Map<Long, BigDecimal> paymentsByAccount)
            throws SQLException {
        Map<Long, BigDecimal> expected = new TreeMap<>();
        try (Statement statement = connection.createStatement();
                ResultSet accounts = statement.executeQuery("SELECT id, opening_balance FROM ledger.accounts")) {
            while (accounts.next()) {
                long id = accounts.getLong(1);
                expected.put(id, accounts.getBigDecimal(2).subtract(paymentsByAccount.getOrDefault(id, BigDecimal.ZERO)));
            }
        }
        return expected;
    }

    /**
     * Sums the unique payments per account (user id) of an input topic's records, read back from the
     * topic itself (feed it every record, e.g. from {@code CommittedTopicReader}): the first record of
     * each message id ({@code idHeader}) that is a payment. Poison (no id, not JSON, no account)
     * counts for nothing, as in the job.
     */
    public static final class PaymentTally implements Consumer<ConsumerRecord<byte[], byte[]>> {
        private final String idHeader;
        private final Set<String> seen = new HashSet<>();
        private final Map<Long, BigDecimal> byAccount = new TreeMap<>();

        public PaymentTally(String idHeader) {
            this.idHeader = idHeader;
        }

        @Override
        public void accept(ConsumerRecord<byte[], byte[]> record) {
            Header id = record.headers().lastHeader(idHeader);
            if (id == null || record.value() == null || !seen.add(new String(id.value(), StandardCharsets.UTF_8))) {
                return;
            }
            JsonNode payment;
            try {
                payment = JSON.readTree(record.value());
            } catch (IOException poison) {
                return;
            }
            if (payment != null && "payment".equals(payment.path("type").asText())
                    && payment.path("user_id").isIntegralNumber() && payment.path("amount").isNumber()) {
                byAccount.merge(payment.get("user_id").asLong(), payment.get("amount").decimalValue(), BigDecimal::add);
            }
        }

        /** The sum of the unique payments per account so far. */
        public Map<Long, BigDecimal> paymentsByAccount() {
            return Collections.unmodifiableMap(byAccount);
        }
    }

    /** The balances in the database, per account. */
    public static Map<Long, BigDecimal> balances(Connection connection) throws SQLException {
        Map<Long, BigDecimal> balances = new TreeMap<>();
        try (Statement statement = connection.createStatement();
                ResultSet accounts = statement.executeQuery("SELECT id, balance FROM ledger.accounts")) {
            while (accounts.next()) {
                balances.put(accounts.getLong(1), accounts.getBigDecimal(2));
            }
        }
        return balances;
    }

    /**
     * Audits the ledger against the inbox {@code eventsTable}: balances, and that each payment's
     * recorded result agrees with the accounts (a rejected "unknown account" names a missing one, an
     * applied payment a known one), and that no effect is pending or failed.
     */
    public static Report audit(Connection connection, String eventsTable) throws SQLException {
        Report report = new Report();
        try (Statement statement = connection.createStatement()) {
            try (ResultSet totals = statement.executeQuery("SELECT count(*), coalesce(sum(opening_balance), 0),"
                    + " coalesce(sum(balance), 0) FROM ledger.accounts")) {
                totals.next();
                report.accounts = totals.getLong(1);
                report.openingTotal = totals.getBigDecimal(2);
                report.balanceTotal = totals.getBigDecimal(3);
            }
            try (ResultSet outcomes = statement.executeQuery("SELECT coalesce(result->>'status', 'pending'),"
                    + " coalesce(result->>'reason', ''), count(*), coalesce(sum(CASE WHEN result->>'status' = 'applied'"
                    + " THEN (payload->>'amount')::numeric END), 0)"
                    + " FROM " + eventsTable + " WHERE payload->>'type' = 'payment' GROUP BY 1, 2")) {
                while (outcomes.next()) {
                    String outcome = outcomes.getString(1) + (outcomes.getString(2).isEmpty() ? "" : ": " + outcomes.getString(2));
                    report.paymentsByOutcome.put(outcome, outcomes.getLong(3));
                    report.appliedTotal = report.appliedTotal.add(outcomes.getBigDecimal(4));
                }
            }
            try (ResultSet pending = statement.executeQuery("SELECT count(*) FROM " + eventsTable
                    + " WHERE result IS NULL OR result->>'status' = 'failed'")) {
                pending.next();
                report.pendingOrFailedEffects = pending.getLong(1);
            }
            // what the payloads of the applied messages say moved, independent of the journal
            collect(statement, report.balanceMismatches, "WITH moves AS ("
                    + " SELECT account, CASE WHEN side = 'to' THEN (payload->>'amount')::numeric"
                    + " ELSE -((payload->>'amount')::numeric + coalesce((payload->>'fee')::numeric, 0)) END AS amount"
                    + " FROM " + eventsTable + ", LATERAL (VALUES ('user_id', 'from', 'payment'),"
                    + " ('transfer_from', 'from', 'transfer'), ('transfer_to', 'to', 'transfer')) AS m(field, side, kind),"
                    + " LATERAL (SELECT ledger.account_id(payload->field) AS account) a"
                    + " WHERE payload->>'type' = kind AND result->>'status' = 'applied'),"
                    + " applied AS (SELECT account, sum(amount) AS moved FROM moves GROUP BY 1)"
                    + " SELECT 'account ' || a.id || ': balance ' || a.balance || ', expected ' || (a.opening_balance"
                    + " + coalesce(p.moved, 0)) FROM ledger.accounts a LEFT JOIN applied p ON p.account = a.id"
                    + " WHERE a.balance <> a.opening_balance + coalesce(p.moved, 0) ORDER BY a.id LIMIT 20");
            collect(statement, report.inconsistentResults, "SELECT e.id || ': ' || e.result FROM " + eventsTable + " e"
                    + " LEFT JOIN ledger.accounts a ON a.id = (e.payload->>'user_id')::bigint"
                    + " WHERE e.payload->>'type' = 'payment' AND ((e.result->>'status' = 'applied' AND a.id IS NULL)"
                    + " OR (e.result->>'reason' = 'unknown account') <> (a.id IS NULL)) ORDER BY e.id LIMIT 20");
            collect(statement, report.journalMismatches, "WITH lines AS (SELECT account, sum(amount) AS moved"
                    + " FROM ledger.journal GROUP BY 1)"
                    + " SELECT 'account ' || a.id || ': balance ' || a.balance || ', opening + journal '"
                    + " || (a.opening_balance + coalesce(l.moved, 0)) FROM ledger.accounts a LEFT JOIN lines l"
                    + " ON l.account = a.id WHERE a.balance <> a.opening_balance + coalesce(l.moved, 0)"
                    + " UNION ALL SELECT 'message ' || message_id || ': lines sum to ' || sum(amount)"
                    + " FROM ledger.journal GROUP BY message_id HAVING sum(amount) <> 0"
                    + " UNION ALL SELECT 'message ' || coalesce(e.id, j.message_id) || ': ' || CASE WHEN e.id IS NULL"
                    + " THEN 'journal lines but no applied payment or transfer' ELSE 'applied without journal lines' END"
                    + " FROM (SELECT id FROM " + eventsTable + " WHERE payload->>'type' IN ('payment', 'transfer')"
                    + " AND result->>'status' = 'applied') e FULL JOIN (SELECT DISTINCT message_id FROM ledger.journal) j"
                    + " ON j.message_id = e.id WHERE e.id IS NULL OR j.message_id IS NULL LIMIT 20");
            // each partition's postings in offset order: a message's first journal line (an identity,
            // allocated as its effect posts) after every earlier offset's of the same partition
            collect(statement, report.outOfOrder, "SELECT source_topic || '/' || source_partition || ': offset '"
                    + " || source_offset || ' posted after offset ' || previous FROM (SELECT e.source_topic,"
                    + " e.source_partition, e.source_offset, lag(e.source_offset) OVER (PARTITION BY e.source_topic,"
                    + " e.source_partition ORDER BY j.first_line) AS previous FROM (SELECT message_id, min(id) AS"
                    + " first_line FROM ledger.journal GROUP BY 1) j JOIN " + eventsTable + " e ON e.id = j.message_id) p"
                    + " WHERE source_offset < previous ORDER BY 1 LIMIT 20");
        }
        return report;
    }

    private static void collect(Statement statement, List<String> into, String sql) throws SQLException {
        try (ResultSet rows = statement.executeQuery(sql)) {
            while (rows.next()) {
                into.add(rows.getString(1));
            }
        }
    }

    /**
     * What {@link #audit} found. Clean when no balance, result, journal line or effect is off; ordered
     * when each partition's payments were posted in offset order.
     */
    public static final class Report {
        public long accounts;
        public BigDecimal openingTotal = BigDecimal.ZERO;
        public BigDecimal balanceTotal = BigDecimal.ZERO;
        public BigDecimal appliedTotal = BigDecimal.ZERO;
        public final Map<String, Long> paymentsByOutcome = new TreeMap<>();
        public long pendingOrFailedEffects;
        /** At most 20 examples each. */
        public final List<String> balanceMismatches = new ArrayList<>();
        public final List<String> inconsistentResults = new ArrayList<>();
        public final List<String> journalMismatches = new ArrayList<>();
        /** Postings of a partition not in its offset order (see {@link #ordered()}). */
        public final List<String> outOfOrder = new ArrayList<>();

        /**
         * Whether each partition's payments were posted in offset order. Not part of {@link #clean()}:
         * at-least-once across writer subtasks allows otherwise (docs/effects.md, Order).
         */
        public boolean ordered() {
            return outOfOrder.isEmpty();
        }

        public boolean clean() {
            return balanceMismatches.isEmpty() && inconsistentResults.isEmpty() && journalMismatches.isEmpty()
                    && pendingOrFailedEffects == 0
                    && openingTotal.subtract(appliedTotal).compareTo(balanceTotal) == 0;
        }

        @Override
        public String toString() {
            return accounts + " accounts: opening " + openingTotal + " - applied payments " + appliedTotal + " = "
                    + openingTotal.subtract(appliedTotal) + ", balances " + balanceTotal + "; payments by outcome "
                    + paymentsByOutcome + "; pending or failed effects " + pendingOrFailedEffects
                    + (balanceMismatches.isEmpty() ? "" : "; BALANCES OFF " + balanceMismatches)
                    + (inconsistentResults.isEmpty() ? "" : "; RESULTS OFF " + inconsistentResults)
                    + (journalMismatches.isEmpty() ? "" : "; JOURNAL OFF " + journalMismatches)
                    + (outOfOrder.isEmpty() ? "; in offset order" : "; OUT OF ORDER " + outOfOrder)
                    + (clean() ? "; clean" : "; NOT CLEAN");
        }
    }
}
