package io.onceflow.tools.bench;

import static java.nio.charset.StandardCharsets.UTF_8;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.onceflow.testing.TestPostgres;
import io.onceflow.tools.generator.EventGenerator;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The peer of the effect path (issue #30): the inbox consumer a payments team would write by hand
 * instead of adopting onceflow. {@code bench.parallelism} threads, each with a plain {@link
 * KafkaConsumer} in one group (auto-commit off), read the run's input topic; per poll, ONE PostgreSQL
 * transaction (durable server, a database of its own) records the poll's new message ids in an inbox
 * table and calls {@link Benchmark#ONE_UPDATE_EFFECT} for each of them, in account order, the inbox row
 * holding the call's result; after the commit, {@code commitSync} of the consumer's offsets.
 *
 * <p>The transaction, in its cheapest honest form: one {@code SELECT} of the poll's ids already in the
 * inbox (the redeliveries), then one set-based {@code INSERT} of the rest whose select list calls the
 * function, so each new id costs one tuple write. The primary key is the once-only guard: were another
 * session to insert the same id meanwhile, the {@code INSERT} fails (23505) and the whole transaction,
 * debits included, rolls back and is tried again. {@code ON CONFLICT DO NOTHING} would not do here: it
 * would skip the row but keep its debit.
 *
 * <p>Records/s: the input records over the time from the first poll to the commit of the last unique
 * id (and its offsets). CPU: this JVM and PostgreSQL over the scenario, as for the other scenarios.
 */
final class InboxConsumerScenario {
    static final String INBOX_TABLE = "inbox";
    private static final Duration POLL_TIMEOUT = Duration.ofMillis(100);
    /** 23505 unique violation (another session recorded an id first), 40001 and 40P01: try the poll's transaction again. */
    private static final Set<String> RETRIED_STATES = Set.of("23505", "40001", "40P01");
    private static final int MAX_ATTEMPTS = 10;
    private static final ObjectMapper JSON = new ObjectMapper();

    private final Workload workload;
    private final String bootstrapServers;
    private final TestPostgres.TestDatabase database;
    /** One group for all threads: the partitions are shared out among them. */
    private final String group = "bench-inbox-" + UUID.randomUUID();
    private final AtomicLong committedIds = new AtomicLong();
    private final AtomicLong startNanos = new AtomicLong();
    private final AtomicLong endNanos = new AtomicLong();
    /** When the last thread got its first partitions: until then (a group rebalance) fewer threads consume. */
    private final AtomicLong allAssignedNanos = new AtomicLong();
    private final AtomicLong assignedThreads = new AtomicLong();
    private final AtomicLong retries = new AtomicLong();
    private final AtomicLong transactions = new AtomicLong();
    private final AtomicBoolean stop = new AtomicBoolean();

    /** @param database a database of its own, with the ledger and the effect function installed */
    InboxConsumerScenario(Workload workload, String bootstrapServers, TestPostgres.TestDatabase database) {
        this.workload = workload;
        this.bootstrapServers = bootstrapServers;
        this.database = database;
    }

    ScenarioResult run(String name) throws Exception {
        // a hand-written inbox keeps the id and the outcome; the payload is the input topic's business
        database.execute("CREATE TABLE " + INBOX_TABLE + " (message_id text PRIMARY KEY, result jsonb NOT NULL)");
        int threads = workload.settings().parallelism();
        Benchmark.say(String.format("%s: %d consumer threads over %,d records...", name, threads,
                workload.inputRecords()));
        Measurement measurement = Measurement.start(workload.meter());
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            List<CompletableFuture<Void>> consumers = new ArrayList<>();
            for (int i = 0; i < threads; i++) {
                consumers.add(CompletableFuture.runAsync(this::consume, pool));
            }
            CompletableFuture<Void> all = CompletableFuture.allOf(consumers.toArray(CompletableFuture[]::new));
            JobScenario.await(workload.backlogTimeout(), () -> endNanos.get() != 0,
                    String.format("%,d unique ids in the inbox", workload.uniqueIds()), () -> {
                        if (all.isDone()) {
                            all.join(); // throws a consumer's failure
                            throw new IllegalStateException("the consumers ended before every id was in the inbox");
                        }
                    });
            double seconds = (endNanos.get() - startNanos.get()) / 1e9;
            ResourceMeter.CpuTime cpu = measurement.cpuSoFar();
            long peakRss = ResourceMeter.peakRssBytes();
            stop.set(true);
            all.get(1, TimeUnit.MINUTES);
            Benchmark.say(String.format("%s: %,d ids committed in %,d transactions after %.1f s, %,d retried; every"
                    + " thread had partitions after %.1f s", name, committedIds.get(), transactions.get(), seconds,
                    retries.get(), allAssignedNanos.get() == 0 ? Double.NaN
                            : (allAssignedNanos.get() - startNanos.get()) / 1e9));
            return measurement.throughputOnly(name, workload.inputRecords(), seconds, cpu, peakRss);
        } finally {
            stop.set(true);
            pool.shutdown();
        }
    }

    /** One consumer thread: poll, one transaction, commit the offsets; until every unique id is in. */
    private void consume() {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        try (KafkaConsumer<byte[], byte[]> consumer =
                        new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer());
                Connection connection = database.connect()) {
            connection.setAutoCommit(false);
            consumer.subscribe(List.of(workload.inputTopic()));
            startNanos.compareAndSet(0, System.nanoTime());
            boolean assigned = false;
            while (!stop.get()) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(POLL_TIMEOUT);
                if (!assigned && !consumer.assignment().isEmpty()) {
                    assigned = true;
                    if (assignedThreads.incrementAndGet() == workload.settings().parallelism()) {
                        allAssignedNanos.set(System.nanoTime());
                    }
                }
                if (records.isEmpty()) {
                    continue;
                }
                long fresh = apply(connection, Batch.of(records));
                // after the database's commit: a crash in between redelivers the poll, which the inbox skips
                consumer.commitSync();
                if (committedIds.addAndGet(fresh) >= workload.uniqueIds()) {
                    endNanos.compareAndSet(0, System.nanoTime());
                }
            }
        } catch (SQLException e) {
            throw new IllegalStateException("the inbox consumer failed", e);
        }
    }

    /** The poll's transaction, tried again on a conflict; returns how many ids were new. */
    private long apply(Connection connection, Batch batch) throws SQLException {
        for (int attempt = 1; ; attempt++) {
            try {
                long fresh = insertNew(connection, batch);
                connection.commit();
                transactions.incrementAndGet();
                return fresh;
            } catch (SQLException e) {
                connection.rollback();
                if (!RETRIED_STATES.contains(e.getSQLState()) || attempt == MAX_ATTEMPTS) {
                    throw e;
                }
                retries.incrementAndGet();
            }
        }
    }

    private static long insertNew(Connection connection, Batch batch) throws SQLException {
        Set<String> seen = new HashSet<>();
        try (PreparedStatement select = connection.prepareStatement(
                "SELECT message_id FROM " + INBOX_TABLE + " WHERE message_id = ANY (?::text[])")) {
            select.setArray(1, connection.createArrayOf("text", batch.ids()));
            try (ResultSet rows = select.executeQuery()) {
                while (rows.next()) {
                    seen.add(rows.getString(1));
                }
            }
        }
        Batch fresh = batch.without(seen);
        if (fresh.ids().length == 0) {
            return 0;
        }
        // a plain scan of the arrays, no join, no sort: the function is called in the arrays' order,
        // which is account order, so that the two threads take the accounts' row locks in one order
        try (PreparedStatement insert = connection.prepareStatement("INSERT INTO " + INBOX_TABLE
                + " (message_id, result) SELECT message_id, " + Benchmark.ONE_UPDATE_EFFECT + "(message_id, payload::jsonb)"
                + " FROM unnest(?::text[], ?::text[]) AS batch (message_id, payload)")) {
            insert.setArray(1, connection.createArrayOf("text", fresh.ids()));
            insert.setArray(2, connection.createArrayOf("text", fresh.payloads()));
            return insert.executeUpdate();
        }
    }

    /**
     * A poll's records as the transaction takes them: the first record of each message id (the
     * {@value EventGenerator#ID_HEADER} header, the job's default id source, which the effect scenarios
     * keep), sorted by the payment's account (orders, which touch no account, first), else in poll order.
     *
     * @param ids message ids, in that order
     * @param payloads their payloads (JSON text), in the same order
     */
    record Batch(String[] ids, String[] payloads) {
        static Batch of(Iterable<ConsumerRecord<byte[], byte[]>> records) {
            Map<String, byte[]> firsts = new LinkedHashMap<>();
            for (ConsumerRecord<byte[], byte[]> record : records) {
                Header id = record.headers().lastHeader(EventGenerator.ID_HEADER);
                if (id == null || record.value() == null) {
                    // the benchmark's input has no poison (Benchmark.produceInput): a dead letter path would be dead code
                    throw new IllegalStateException("a record without an id or value at " + record.topic() + "/"
                            + record.partition() + "@" + record.offset());
                }
                firsts.putIfAbsent(new String(id.value(), UTF_8), record.value());
            }
            List<Map.Entry<String, byte[]>> sorted = new ArrayList<>(firsts.entrySet());
            // stable: payments to one account keep their poll order
            sorted.sort(Comparator.comparingLong(entry -> account(entry.getValue())));
            return new Batch(sorted.stream().map(Map.Entry::getKey).toArray(String[]::new),
                    sorted.stream().map(entry -> new String(entry.getValue(), UTF_8)).toArray(String[]::new));
        }

        /** The payment's {@code user_id} (the account {@code bench.debit} updates), or 0 for anything else. */
        private static long account(byte[] payload) {
            try {
                return JSON.readTree(payload).path("user_id").asLong(0);
            } catch (IOException e) {
                throw new UncheckedIOException("a payload that is not JSON", e);
            }
        }

        /** This batch less the ids in {@code seen}, in the same order. */
        Batch without(Set<String> seen) {
            if (seen.isEmpty()) {
                return this;
            }
            List<String> keptIds = new ArrayList<>();
            List<String> keptPayloads = new ArrayList<>();
            for (int i = 0; i < ids.length; i++) {
                if (!seen.contains(ids[i])) {
                    keptIds.add(ids[i]);
                    keptPayloads.add(payloads[i]);
                }
            }
            return new Batch(keptIds.toArray(String[]::new), keptPayloads.toArray(String[]::new));
        }
    }
}
