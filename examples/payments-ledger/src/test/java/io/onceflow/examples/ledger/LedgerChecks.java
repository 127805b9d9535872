package io.onceflow.examples.ledger;

import static java.nio.charset.StandardCharsets.UTF_8;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/** What the example's tests read back from the ledger, and the double-entry invariants they hold it to. */
final class LedgerChecks {
    private LedgerChecks() {}

    /** A file of the example's {@code src/main/resources}, e.g. {@code db/ledger.sql}. */
    static String resource(String name) {
        try (InputStream in = LedgerChecks.class.getResourceAsStream("/" + name)) {
            return new String(in.readAllBytes(), UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static Map<Long, BigDecimal> balances(Connection connection) throws SQLException {
        Map<Long, BigDecimal> balances = new TreeMap<>();
        try (Statement statement = connection.createStatement();
                ResultSet rows = statement.executeQuery("SELECT id, balance FROM ledger.accounts")) {
            while (rows.next()) {
                balances.put(rows.getLong(1), rows.getBigDecimal(2));
            }
        }
        return balances;
    }

    /** How many journal lines each message id wrote (two per applied payment or transfer, none otherwise). */
    static Map<String, Long> journalLines(Connection connection) throws SQLException {
        Map<String, Long> lines = new TreeMap<>();
        try (Statement statement = connection.createStatement();
                ResultSet rows = statement.executeQuery("SELECT message_id, count(*) FROM ledger.journal GROUP BY 1")) {
            while (rows.next()) {
                lines.put(rows.getString(1), rows.getLong(2));
            }
        }
        return lines;
    }

    /**
     * Where the journal and the balances disagree: a message whose lines do not sum to zero, an
     * account whose opening balance plus its lines is not its balance. Empty when they agree.
     */
    static List<String> journalProblems(Connection connection) throws SQLException {
        List<String> problems = new ArrayList<>();
        try (Statement statement = connection.createStatement();
                ResultSet rows = statement.executeQuery("SELECT 'message ' || message_id || ': lines sum to '"
                        + " || sum(amount) FROM ledger.journal GROUP BY message_id HAVING sum(amount) <> 0"
                        + " UNION ALL SELECT 'account ' || a.id || ': balance ' || a.balance || ', opening + journal '"
                        + " || (a.opening_balance + coalesce(sum(j.amount), 0)) FROM ledger.accounts a"
                        + " LEFT JOIN ledger.journal j ON j.account = a.id GROUP BY a.id"
                        + " HAVING a.balance <> a.opening_balance + coalesce(sum(j.amount), 0)")) {
            while (rows.next()) {
                problems.add(rows.getString(1));
            }
        }
        return problems;
    }
}
