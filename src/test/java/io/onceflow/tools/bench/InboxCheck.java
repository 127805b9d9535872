package io.onceflow.tools.bench;

import io.onceflow.testing.Ledger;
import io.onceflow.testing.TestPostgres;
import io.onceflow.tools.generator.EventGenerator;
import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Whether the hand-written inbox ({@link InboxConsumerScenario}) did its work exactly once, checked
 * after its run: the inbox holds exactly one row per unique id of the input, each with the function's
 * result; every account's balance is its opening balance less the unique payments to it, to the cent,
 * with the payments tallied from the input topic itself (first record of each id, as the job counts
 * them); and, when the onceflow effect scenario ran in the same run over the same input, its ledger
 * has the same balances. A throughput figure of a consumer that lost or doubled debits means nothing,
 * so the benchmark fails on any problem found here.
 */
final class InboxCheck {
    /** Mismatched accounts named in a problem: enough to see a pattern. */
    private static final int EXAMPLES = 5;

    private InboxCheck() {}

    /**
     * Runs the checks, prints what they found and returns the problems (none when it holds).
     *
     * @param onceflowLedger the database of the "effect-one-update" scenario, if it ran
     */
    static List<String> check(TestPostgres.TestDatabase inbox, List<String> uniqueIds, String bootstrapServers,
            String inputTopic, Optional<TestPostgres.TestDatabase> onceflowLedger) throws Exception {
        List<String> problems = new ArrayList<>();
        checkRows(inbox, uniqueIds, problems);
        Ledger.PaymentTally tally = new Ledger.PaymentTally(EventGenerator.ID_HEADER);
        readTopic(bootstrapServers, inputTopic, tally);
        try (Connection connection = inbox.connect()) {
            Map<Long, BigDecimal> balances = Ledger.balances(connection);
            Map<Long, BigDecimal> expected = Ledger.expectedBalances(connection, tally.paymentsByAccount());
            BigDecimal expectedDebits = tally.paymentsByAccount().entrySet().stream()
                    .filter(payments -> balances.containsKey(payments.getKey()))
                    .map(Map.Entry::getValue).reduce(BigDecimal.ZERO, BigDecimal::add);
            Benchmark.say(String.format(Locale.ROOT, "inbox check: %,d accounts debited %s in all; the unique payments"
                    + " to known accounts in the input sum to %s", balances.size(), debited(connection),
                    expectedDebits));
            compare("balances against the input's unique payments", balances, expected, problems);
            if (onceflowLedger.isPresent()) {
                try (Connection other = onceflowLedger.get().connect()) {
                    compare("balances against the effect-one-update scenario's", balances, Ledger.balances(other),
                            problems);
                }
            }
        }
        Benchmark.say(problems.isEmpty() ? "inbox check: holds" : "inbox check: FAILED: " + problems);
        return problems;
    }

    /** One row per unique id, no other, each with an applied or rejected result. */
    private static void checkRows(TestPostgres.TestDatabase inbox, List<String> uniqueIds, List<String> problems)
            throws SQLException {
        Set<String> expected = new HashSet<>(uniqueIds);
        Map<String, Long> outcomes = new TreeMap<>();
        long[] rows = {0, 0};
        inbox.query("SELECT message_id, coalesce(result->>'status', 'none') FROM " + InboxConsumerScenario.INBOX_TABLE,
                row -> {
                    rows[0]++;
                    if (!expected.contains(row.getString(1))) {
                        rows[1]++;
                    }
                    outcomes.merge(row.getString(2), 1L, Long::sum);
                });
        Benchmark.say(String.format(Locale.ROOT, "inbox check: %,d rows for %,d unique ids (%,d not of the input);"
                + " results %s", rows[0], expected.size(), rows[1], outcomes));
        // the primary key makes the rows' ids distinct: as many rows as ids, all of the input, is one per id
        if (rows[0] != expected.size() || rows[1] != 0) {
            problems.add(String.format(Locale.ROOT, "%,d inbox rows (%,d not of the input) for %,d unique ids",
                    rows[0], rows[1], expected.size()));
        }
        long unfinished = outcomes.entrySet().stream()
                .filter(outcome -> !Set.of("applied", "rejected").contains(outcome.getKey()))
                .mapToLong(Map.Entry::getValue).sum();
        if (unfinished > 0) {
            problems.add(unfinished + " inbox rows without an applied or rejected result");
        }
    }

    /** The sum of all debits: opening balances less balances. */
    private static BigDecimal debited(Connection connection) throws SQLException {
        try (Statement statement = connection.createStatement();
                ResultSet sum = statement.executeQuery("SELECT coalesce(sum(opening_balance - balance), 0)"
                        + " FROM ledger.accounts")) {
            sum.next();
            return sum.getBigDecimal(1);
        }
    }

    private static void compare(String what, Map<Long, BigDecimal> actual, Map<Long, BigDecimal> expected,
            List<String> problems) {
        List<String> mismatches = new ArrayList<>();
        Set<Long> accounts = new TreeSet<>(actual.keySet());
        accounts.addAll(expected.keySet());
        for (long account : accounts) {
            BigDecimal a = actual.get(account);
            BigDecimal e = expected.get(account);
            if (a == null || e == null || a.compareTo(e) != 0) {
                mismatches.add("account " + account + ": " + a + ", expected " + e);
            }
        }
        Benchmark.say(String.format(Locale.ROOT, "inbox check: %s: %,d accounts, %,d differ", what, accounts.size(),
                mismatches.size()));
        if (!mismatches.isEmpty()) {
            problems.add(what + ": " + mismatches.size() + " accounts differ, e.g. "
                    + mismatches.subList(0, Math.min(EXAMPLES, mismatches.size())));
        }
    }

    /** Hands every record of {@code topic}, from its beginning to its end now, to {@code sink}. */
    private static void readTopic(String bootstrapServers, String topic, Ledger.PaymentTally sink) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers);
        try (KafkaConsumer<byte[], byte[]> consumer =
                new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            List<TopicPartition> partitions = consumer.partitionsFor(topic).stream()
                    .map(p -> new TopicPartition(topic, p.partition())).toList();
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> end = consumer.endOffsets(partitions);
            while (partitions.stream().anyMatch(tp -> consumer.position(tp) < end.get(tp))) {
                consumer.poll(Duration.ofMillis(200)).forEach(sink);
            }
        }
    }
}
