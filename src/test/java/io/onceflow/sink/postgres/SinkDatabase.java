package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.internal.EffectWorker;
import io.onceflow.testing.Eventually;
import io.onceflow.sink.postgres.options.StartMode;
import io.onceflow.sink.postgres.options.PostgresTableOptions;
import io.onceflow.api.Event;
import io.onceflow.sink.postgres.internal.PostgresConnections;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.PostgresCommittable;
import io.onceflow.sink.postgres.internal.PostgresWriterState;
import io.onceflow.sink.postgres.internal.TransactionId;
import io.onceflow.sink.postgres.internal.EffectBatch;
import io.onceflow.sink.postgres.internal.EventsTable;
import io.onceflow.sink.postgres.internal.PendingEffectsTable;
import io.onceflow.sink.postgres.internal.PostgresSchema;
import io.onceflow.sink.postgres.internal.PostgresExactlyOnceWriter;
import io.onceflow.sink.postgres.internal.WriterStart;
import io.onceflow.testing.TestPostgres.TestDatabase;
import io.onceflow.testing.TestPostgres;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * What the sink tests ask of a fresh database (of the shared {@link TestPostgres} server unless given): sinks,
 * configs and writers on it (this package's types), and its rows as the sink wrote them.
 */
final class SinkDatabase {
    static final String TABLE = PostgresTableOptions.DEFAULT_EVENTS;

    final TestDatabase database;
    private final AtomicInteger attempts = new AtomicInteger();

    SinkDatabase() {
        this(TestPostgres.shared().newDatabase());
    }

    /** A database of another server, e.g. one with TLS ({@link io.onceflow.testing.SecuredPostgres}). */
    SinkDatabase(TestDatabase database) {
        this.database = database;
    }

    PostgresSinkBuilder builder(String sinkPrefix) {
        return PostgresSink.builder()
                .setJdbcUrl(database.jdbcUrl())
                .setUser(database.user())
                .setPassword(database.password())
                .setSinkPrefix(sinkPrefix)
                .setBatchSize(100)
                .setLockTimeout(Duration.ofSeconds(2))
                .setStatementTimeout(Duration.ofSeconds(20));
    }

    /** As {@link #builder}, connecting as {@code role} (which needs no password: embedded server only). */
    PostgresSinkBuilder builderAs(String sinkPrefix, String role) {
        // the embedded server's URL names its user, and URL parameters win over the driver's properties
        return builder(sinkPrefix)
                .setJdbcUrl(database.jdbcUrl().replace("user=" + database.user(), "user=" + role))
                .setUser(role)
                .setPassword("");
    }

    /** The config of a new run of {@code sinkPrefix} (a submission that discards pending work). */
    PostgresSinkConfig config(String sinkPrefix) {
        return config(builder(sinkPrefix));
    }

    /** The config of a new run (a submission that discards pending work). */
    static PostgresSinkConfig config(PostgresSinkBuilder builder) {
        return newRun(builder.build().config());
    }

    /** The same sink submitted again: a new run. */
    static PostgresSinkConfig newRun(PostgresSinkConfig config) {
        try {
            return new PostgresRunRegistry(config).startRun(1, StartMode.FRESH_DISCARDING_PENDING, "test job").config();
        } catch (SQLException e) {
            throw new IllegalStateException(e);
        }
    }

    /**
     * A new attempt of a writer subtask, as Flink would start it: attempt numbers only grow (one
     * counter for all subtasks is simpler and as good).
     */
    WriterStart attempt(int subtask, int parallelism, OptionalLong restoredCheckpoint, PostgresWriterState... state) {
        return new WriterStart(subtask, parallelism, 128, attempts.incrementAndGet(), "test-job-id",
                restoredCheckpoint, List.of(state));
    }

    /** A writer of a fresh start, subtask 0 of 1. */
    PostgresExactlyOnceWriter freshWriter(PostgresSinkConfig config) throws IOException {
        return writer(config, attempt(0, 1, OptionalLong.empty()));
    }

    /** A writer of subtask 0 of 1, restored from {@code checkpointId}. */
    PostgresExactlyOnceWriter restoredWriter(PostgresSinkConfig config, long checkpointId) throws IOException {
        return writer(config, attempt(0, 1, OptionalLong.of(checkpointId)));
    }

    static PostgresExactlyOnceWriter writer(PostgresSinkConfig config, WriterStart start) throws IOException {
        return new PostgresExactlyOnceWriter(config, start, PostgresSinkMetrics.unregistered());
    }

    /**
     * A writer taken through its first checkpoint barrier, {@code barrier}, without events: it has
     * claimed its indices and recovered, as every writer does there.
     */
    static PostgresExactlyOnceWriter claimedWriter(PostgresSinkConfig config, WriterStart start, long barrier)
            throws IOException {
        PostgresExactlyOnceWriter writer = writer(config, start);
        try {
            writer.prepareCommit();
            writer.snapshotState(barrier);
            return writer;
        } catch (IOException | RuntimeException e) {
            try {
                writer.close();
            } catch (Exception closing) {
                e.addSuppressed(closing);
            }
            throw e;
        }
    }

    /** A builder of {@code sinkPrefix} on a server of the test's own (not the shared one). */
    static PostgresSinkBuilder builder(TestPostgres server, String sinkPrefix) {
        return PostgresSink.builder().setJdbcUrl(server.jdbcUrl()).setUser(server.user()).setPassword("")
                .setSinkPrefix(sinkPrefix).setLockTimeout(Duration.ofSeconds(2))
                .setStatementTimeout(Duration.ofSeconds(20));
    }

    /** Attempt {@code attempt} of subtask 0 of 1, restored from {@code restored} without writer state. */
    static PostgresExactlyOnceWriter writer(PostgresSinkConfig config, int attempt, OptionalLong restored)
            throws IOException {
        return writer(config, new WriterStart(0, 1, 128, attempt, "test-job-id", restored, List.of()));
    }

    /** deliveries by id, of every committed row of the default events table on {@code server}. */
    static Map<String, Integer> deliveries(TestPostgres server) {
        Map<String, Integer> deliveries = new TreeMap<>();
        for (String row : server.rows("SELECT id, deliveries FROM " + TABLE)) {
            String[] columns = row.split(" ");
            deliveries.put(columns[0], Integer.parseInt(columns[1]));
        }
        return deliveries;
    }

    static Event event(String id) {
        byte[] payload = ("{\"id\":\"" + id + "\"}").getBytes(StandardCharsets.UTF_8);
        return new Event(id, payload, "input", 0, Math.abs(id.hashCode()), 0L, new HashMap<>());
    }

    /** deliveries by id, of every committed row. */
    Map<String, Integer> deliveriesById() throws SQLException {
        Map<String, Integer> deliveries = new HashMap<>();
        query("SELECT id, deliveries FROM " + TABLE, row -> deliveries.put(row.getString(1), row.getInt(2)));
        return deliveries;
    }

    /** id -> SQLSTATE of every row in the rejects table. */
    Map<String, String> rejects() throws SQLException {
        Map<String, String> rejects = new HashMap<>();
        query("SELECT id, sql_state FROM " + PostgresTableOptions.DEFAULT_REJECTS,
                row -> rejects.put(row.getString(1), row.getString(2)));
        return rejects;
    }

    /** The gids of this database's prepared transactions of {@code sinkPrefix}. */
    List<TransactionId> prepared(String sinkPrefix) throws SQLException {
        List<TransactionId> gids = new ArrayList<>();
        query("SELECT gid FROM pg_prepared_xacts WHERE database = current_database()",
                row -> TransactionId.parse(row.getString(1), sinkPrefix).ifPresent(gids::add));
        return gids;
    }

    /**
     * Applies every queued effect of {@code config}'s sink, as its effect workers would, on this
     * thread, in batches of the sink's batch size. Skips effects that another session holds.
     *
     * @return how many effects it took (applied, rejected or failed)
     */
    static int drainEffects(PostgresSinkConfig config, PostgresSinkMetrics metrics) throws SQLException {
        EffectBatch batch = new EffectBatch(new EventsTable(config.tables().events()), config.sinkPrefix(),
                config.tables().effectFunction(), config.tables().effectKeys(), config.effectResults() != null, metrics);
        try (Connection connection = PostgresConnections.open(config, "effects-test")) {
            int total = 0;
            for (int taken = 1; taken > 0; total += taken) {
                taken = batch.run(connection, config.writer().batchSize());
            }
            return total;
        }
    }

    /**
     * Writes {@code events} in checkpoint 1 of a fresh writer of {@code config}, closes the writer
     * (its effect worker with it) and commits the checkpoint: their effects wait in the queue.
     */
    void commitFreshCheckpoint(PostgresSinkConfig config, Event... events) throws Exception {
        PostgresCommittable committable;
        try (PostgresExactlyOnceWriter writer = freshWriter(config)) {
            committable = PostgresTwoPhaseCommitTest.checkpoint(writer, 1, events);
        }
        PostgresTwoPhaseCommitTest.commit(config, committable);
    }

    /**
     * Runs the effect workers of {@code parallelism} writer subtasks of {@code config} until
     * {@code done} holds (failing with {@code what} after {@code patience}), then closes them.
     */
    static void runEffectWorkersUntil(PostgresSinkConfig config, int parallelism, String what, Duration patience,
            Eventually.Condition<Exception> done) throws Exception {
        List<EffectWorker> workers = new ArrayList<>();
        try {
            for (int subtask = 0; subtask < parallelism; subtask++) {
                workers.add(EffectWorker.startIfConfigured(config, subtask, parallelism, PostgresSinkMetrics.unregistered()));
            }
            Eventually.await(what, patience, Duration.ofMillis(50), done);
        } finally {
            workers.forEach(EffectWorker::close);
        }
    }

    /**
     * Writes {@code events} in checkpoint {@code checkpointId} of the same run, by a writer restored
     * from the checkpoint before it, and commits it: a later checkpoint of a running job.
     */
    void commitCheckpoint(PostgresSinkConfig config, long checkpointId, Event... events) throws Exception {
        PostgresCommittable committable;
        try (PostgresExactlyOnceWriter writer = restoredWriter(config, checkpointId - 1)) {
            committable = PostgresTwoPhaseCommitTest.checkpoint(writer, checkpointId, events);
        }
        PostgresTwoPhaseCommitTest.commit(config, committable);
    }

    /** {@code result->>'status'} of every committed row, by id: null while its effect is pending. */
    Map<String, String> effectStatuses() throws SQLException {
        Map<String, String> statuses = new HashMap<>();
        query("SELECT id, result->>'status' FROM " + TABLE, row -> statuses.put(row.getString(1), row.getString(2)));
        return statuses;
    }

    /**
     * The effect tests' ledger: schema {@code ledger}, {@code ledger.accounts} (text ids, balances
     * that may not go below 0) opened with {@code accounts} (a {@code VALUES} list or a query), and
     * the effect function {@code function} (its {@code CREATE FUNCTION} statement).
     */
    void createLedger(String accounts, String function) throws SQLException {
        execute("CREATE SCHEMA ledger");
        execute("CREATE TABLE ledger.accounts (id text PRIMARY KEY, balance numeric(18,2) NOT NULL CHECK (balance >= 0))");
        execute("INSERT INTO ledger.accounts " + accounts);
        execute(function);
    }

    /** The balance of each account of the effect tests' ledger ({@code ledger.accounts}), in whole units. */
    Map<String, Integer> ledgerBalances() throws SQLException {
        Map<String, Integer> balances = new HashMap<>();
        query("SELECT id, balance FROM ledger.accounts",
                row -> balances.put(row.getString(1), row.getBigDecimal(2).intValueExact()));
        return balances;
    }

    /** How many effects are queued. */
    /**
     * The tables' DDL as the version before effects were bound to a sink and function left the
     * queue: without sink_prefix, effect_function, failed_at, source_topic and queued_xid.
     */
    static String ddlBeforeBoundEffects() {
        String ddl = new PostgresSchema(PostgresTableOptions.defaults()).ddl();
        String earlier = ddl.replace(",\n    sink_prefix text,\n    effect_function text,\n    failed_at timestamptz,"
                + "\n    source_topic text,\n    queued_xid xid8", "");
        String index = new PostgresSchema(PostgresTableOptions.defaults()).ddl().lines()
                .filter(line -> line.startsWith("CREATE INDEX")).findFirst().orElseThrow();
        if (earlier.equals(ddl) || !index.contains("_partition_order")) {
            throw new IllegalStateException("the queue's DDL changed: update ddlBeforeBoundEffects");
        }
        // that version's index of the queue
        return earlier.replace(index, "CREATE INDEX IF NOT EXISTS onceflow_events_effect_queue_source_order"
                + " ON onceflow_events_effect_queue (source_partition, source_offset);");
    }

    /** The effects queued to be called; not those that failed (they stay queued for an operator). */
    long queuedEffects() throws SQLException {
        return count("SELECT count(*) FROM " + TABLE + PostgresTableOptions.EFFECT_QUEUE_SUFFIX + " WHERE failed_at IS NULL");
    }

    /** The effects that failed and wait for an operator. */
    long failedEffects() throws SQLException {
        return count("SELECT count(*) FROM " + TABLE + PostgresTableOptions.EFFECT_QUEUE_SUFFIX + " WHERE failed_at IS NOT NULL");
    }

    private long count(String sql) throws SQLException {
        long[] count = {0};
        query(sql, row -> count[0] = row.getLong(1));
        return count[0];
    }

    void execute(String sql) throws SQLException {
        database.execute(sql);
    }

    void query(String sql, TestPostgres.RowConsumer consumer) throws SQLException {
        database.query(sql, consumer);
    }
}
