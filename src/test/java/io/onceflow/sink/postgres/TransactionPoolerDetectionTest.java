package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.options.StartMode;
import io.onceflow.sink.postgres.options.PostgresTableOptions;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresCommittable;
import io.onceflow.sink.postgres.internal.SinkRuns;
import io.onceflow.sink.postgres.internal.PostgresExactlyOnceWriter;
import io.onceflow.testing.TransactionPoolingProxy;
import io.onceflow.testing.TransactionPoolingProxy.Order;
import io.onceflow.testing.TransactionPoolingProxy.Pooling;
import java.io.IOException;
import java.sql.Connection;
import java.sql.DriverManager;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * A transaction-pooling proxy ({@link TransactionPoolingProxy}, PgBouncer's {@code pool_mode =
 * transaction}) is refused before a run registers and before a writer claims anything; a direct
 * connection and a session-pooling proxy are not.
 */
class TransactionPoolerDetectionTest {
    private final SinkDatabase db = new SinkDatabase();

    @ParameterizedTest(name = "{0} server connections, {1}")
    @CsvSource({"1, LIFO", "2, LIFO", "4, LIFO", "1, FIFO", "2, FIFO", "4, FIFO"})
    void aRunStartThroughATransactionPoolerIsRefusedAndRegistersNothing(int poolSize, Order order) throws Exception {
        try (TransactionPoolingProxy proxy = TransactionPoolingProxy.start(db.database, poolSize, Pooling.TRANSACTION,
                order)) {
            PostgresRunRegistry pooled = db.builder("job").setJdbcUrl(proxy.jdbcUrl()).build();

            assertThatThrownBy(() -> pooled.startRun(1, StartMode.FRESH, "pooled job"))
                    .isInstanceOf(IllegalStateException.class)
                    .hasMessage(SinkRuns.transactionPoolingMessage());
        }
        assertThat(db.database.rows("SELECT count(*) FROM pg_class WHERE relname LIKE 'onceflow%'"))
                .as("refused before it created a table or registered a run").containsExactly("0");
    }

    @Test
    void aDirectConnectionAndASessionPoolerPass() throws Exception {
        assertThat(db.builder("job").build().startRun(1, StartMode.FRESH, "direct job").run()).isPositive();
        try (TransactionPoolingProxy proxy = TransactionPoolingProxy.start(db.database, 6, Pooling.SESSION,
                Order.LIFO)) {
            RegisteredRun run = db.builder("job").setJdbcUrl(proxy.jdbcUrl()).build()
                    .startRun(1, StartMode.FRESH, "session-pooled job");
            assertThat(run.run()).isPositive();
            PostgresSinkConfig config = db.builder("job").setJdbcUrl(proxy.jdbcUrl()).build().config()
                    .withRun(run.run());
            SinkDatabase.writer(config, db.attempt(0, 1, OptionalLong.empty())).close();
        }
        assertThat(db.database.rows("SELECT count(*) FROM " + PostgresTableOptions.DEFAULT_RUNS)).containsExactly("2");
    }

    /** Why the check needs other clients: alone on an idle pool, a connection keeps getting the same backend. */
    @ParameterizedTest(name = "{0} server connections, {1}")
    @CsvSource({"1, LIFO", "4, LIFO"})
    void backToBackStatementsOnAnIdlePoolShowOneBackend(int poolSize, Order order) throws Exception {
        try (TransactionPoolingProxy proxy = TransactionPoolingProxy.start(db.database, poolSize, Pooling.TRANSACTION,
                order);
                Connection connection = DriverManager.getConnection(proxy.jdbcUrl(), db.database.user(), "")) {
            List<Integer> pids = new ArrayList<>();
            for (int i = 0; i < 5; i++) {
                pids.add(TransactionPoolingProxy.backendPid(connection));
            }
            assertThat(pids).as("what the former two-statement check compared").containsOnly(pids.get(0));
        }
    }

    @ParameterizedTest(name = "{0} server connections, {1}")
    @CsvSource({"1, LIFO", "4, LIFO", "1, FIFO"})
    void aWriterThroughATransactionPoolerStopsBeforeItClaimsItsSubtask(int poolSize, Order order) throws Exception {
        long run = db.config("job").run(); // registered directly, as main would with another URL
        try (TransactionPoolingProxy proxy = TransactionPoolingProxy.start(db.database, poolSize, Pooling.TRANSACTION,
                order)) {
            PostgresSinkConfig pooled = db.builder("job").setJdbcUrl(proxy.jdbcUrl()).build().config().withRun(run);

            assertThatThrownBy(() -> SinkDatabase.writer(pooled, db.attempt(0, 1, OptionalLong.empty())))
                    .isInstanceOf(IOException.class)
                    .hasMessageContaining(SinkRuns.transactionPoolingMessage());
        }
        assertThat(db.database.rows("SELECT count(*) FROM " + PostgresTableOptions.DEFAULT_WRITERS))
                .as("no claim").containsExactly("0");
    }

    /**
     * The writer's one probe misses some round-robin pools (with this proxy, two of 2, 4 and 7
     * server connections): its claim at its first barrier is refused instead, as the session that runs its
     * check after the advisory lock does not hold the lock, before any recovery action: an abandoned
     * transaction that a recovery would roll back stays prepared. Nothing of the writer is prepared
     * and no row is written. Fails with the check after the lock removed (tried: FIFO 2 and 7 went
     * through their first checkpoint).
     */
    @Test
    void aWriterThatGetsPastItsStartCheckIsRefusedAtItsFirstBarrierBeforeItRecovers() throws Exception {
        PostgresCommittable abandoned;
        try (PostgresExactlyOnceWriter crashed = db.freshWriter(db.config("job"))) {
            abandoned = PostgresTwoPhaseCommitTest.checkpoint(crashed, 1, "orphan");
        }
        Map<String, String> refusedAt = new TreeMap<>();
        for (Order order : Order.values()) {
            for (int poolSize : new int[] {1, 2, 4, 7}) {
                // a run of its own: a writer of the same run that claimed before makes the next one defer
                long run = SinkDatabase.newRun(db.config("job")).run();
                try (TransactionPoolingProxy proxy = TransactionPoolingProxy.start(db.database, poolSize,
                        Pooling.TRANSACTION, order)) {
                    PostgresSinkConfig pooled = db.builder("job").setJdbcUrl(proxy.jdbcUrl()).build().config()
                            .withRun(run);
                    refusedAt.put(order + " " + poolSize, firstCheckpointRefusal(pooled));
                }
            }
        }
        // which FIFO pools pass the probe depends on how many statements the start sends (FIFO 2 and 7,
        // or 2 and 4): each pool is refused at one of the two, and some reach the first barrier
        assertThat(refusedAt).hasSize(8).allSatisfy((pool, where) -> assertThat(where).isIn("start", "first barrier"));
        assertThat(refusedAt).containsValue("first barrier");
        assertThat(refusedAt).containsEntry("LIFO 2", "start").containsEntry("LIFO 7", "start");
        assertThat(db.prepared("job")).as("not rolled back by a pooled writer").containsExactly(
                abandoned.transactionId());
        assertThat(db.deliveriesById()).isEmpty();
    }

    /** Where a writer of {@code config} is refused on its way to its first prepared transaction. */
    private String firstCheckpointRefusal(PostgresSinkConfig config) throws Exception {
        PostgresExactlyOnceWriter writer;
        try {
            writer = SinkDatabase.writer(config, db.attempt(0, 1, OptionalLong.empty()));
        } catch (IOException e) {
            assertThat(e).hasMessageContaining(SinkRuns.transactionPoolingMessage());
            return "start";
        }
        try (writer) {
            assertThatThrownBy(() -> PostgresTwoPhaseCommitTest.checkpoint(writer, 1, "a", "b"))
                    .isInstanceOf(IOException.class)
                    .hasMessageContaining(SinkRuns.transactionPoolingMessage());
            return "first barrier";
        }
    }
}
