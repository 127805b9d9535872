package io.onceflow.sink.postgres;

import static io.onceflow.sink.postgres.BusinessEffectsTest.payment;
import static io.onceflow.sink.postgres.PostgresTwoPhaseCommitTest.checkpoint;
import static io.onceflow.sink.postgres.PostgresTwoPhaseCommitTest.commit;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.entry;

import io.onceflow.api.Event;
import io.onceflow.sink.postgres.internal.PostgresConnections;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.PostgresCommittable;
import io.onceflow.sink.postgres.internal.EffectFailures;
import io.onceflow.sink.postgres.internal.EffectWorker;
import io.onceflow.sink.postgres.internal.PostgresAtLeastOnceWriter;
import io.onceflow.sink.postgres.internal.PostgresExactlyOnceWriter;
import io.onceflow.testing.Eventually;
import io.onceflow.tools.effects.EffectActions;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import io.onceflow.sink.postgres.options.PostgresTableOptions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.Gauge;
import org.apache.flink.metrics.SimpleCounter;
import org.apache.flink.metrics.groups.UnregisteredMetricsGroup;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The effect workers against a real server: they apply queued effects off the task thread, in
 * transactions that lock the effects' keys in one order (transfers both ways neither deadlock nor
 * wait out a lock timeout), retry what is not the message's fault (a cancelled statement) without
 * marking anything failed, and are not stalled by a paused worker.
 */
class EffectWorkerTest {
    private static final String KEYS = "ledger.accounts_of";
    private static final Duration PATIENCE = Duration.ofSeconds(60);
    /** apply_payment, 5 ms slower: long enough for concurrent batches to overlap. */
    private static final String SLOW_PAYMENT = "CREATE FUNCTION ledger.slow_payment(message_id text, payload jsonb)"
            + " RETURNS jsonb LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.005);"
            + " RETURN ledger.apply_payment(message_id, payload); END $$";

    private final SinkDatabase db = new SinkDatabase();

    @BeforeEach
    void createTheLedger() throws Exception {
        db.createLedger("SELECT 'a' || n, 1000 FROM generate_series(0, 19) n", BusinessEffectsTest.APPLY_PAYMENT);
        db.execute("CREATE FUNCTION " + KEYS + "(message_id text, payload jsonb) RETURNS text[] LANGUAGE sql"
                + " IMMUTABLE AS $$ SELECT ARRAY[payload->>'from', payload->>'to'] $$");
    }

    private PostgresSinkBuilder sink() {
        return db.builder("ledger").setEffectFunction(BusinessEffectsTest.FUNCTION).setEffectKeys(KEYS);
    }

    @Test
    void transfersBothWaysOnTwoSubtasksNeitherDeadlockNorWaitOutALockTimeout() throws Exception {
        int batch = 19;
        db.execute(SLOW_PAYMENT);
        PostgresSinkConfig config = db.config(sink().setEffectFunction("ledger.slow_payment").setBatchSize(batch));
        PostgresSinkMetrics metrics = PostgresSinkMetrics.unregistered();
        // blocks of one batch each, in source order, alternating between subtasks and directions: the two
        // workers take neighbouring blocks at once, one moving money up the chain a0, a1, ... a19 and the
        // other down it, so each holds the accounts the other's next transfer needs
        List<List<Event>> bySubtask = List.of(new ArrayList<>(), new ArrayList<>());
        for (int i = 0; i < 38 * batch; i++) {
            int block = i / batch;
            int step = i % batch;
            int from = block % 2 == 0 ? step : 19 - step;
            int to = block % 2 == 0 ? from + 1 : from - 1;
            bySubtask.get(block % 2).add(payment("t" + i, "a" + from, "a" + to, 1));
        }
        PostgresExactlyOnceWriter[] writers = new PostgresExactlyOnceWriter[2];
        try {
            PostgresCommittable[] committables = new PostgresCommittable[2];
            for (int subtask = 0; subtask < 2; subtask++) {
                writers[subtask] = new PostgresExactlyOnceWriter(config, db.attempt(subtask, 2, OptionalLong.empty()),
                        metrics);
                committables[subtask] = checkpoint(writers[subtask], 1, bySubtask.get(subtask).toArray(Event[]::new));
            }
            commit(config, committables[0]);
            commit(config, committables[1]);
            awaitDrained();
        } finally {
            for (PostgresExactlyOnceWriter writer : writers) {
                if (writer != null) {
                    writer.close();
                }
            }
        }
        assertThat(db.effectStatuses().values()).hasSize(38 * batch).containsOnly("applied");
        assertThat(metrics.effectRetries.getCount()).as("no deadlock, no lock timeout: nothing rolled back").isZero();
        assertThat(metrics.effectsApplied.getCount()).isEqualTo(38 * batch);
        assertThat(total()).as("money is moved, never made").isEqualTo(20_000);
    }

    @Test
    void aCancelledEffectStatementIsRetriedAndEveryEffectAppliedOnce() throws Exception {
        db.execute(SLOW_PAYMENT);
        PostgresSinkConfig config = db.config(sink().setEffectFunction("ledger.slow_payment").setBatchSize(100));
        PostgresSinkMetrics metrics = PostgresSinkMetrics.unregistered();
        // enough calls that three cancels land before the queue drains, on a loaded machine too (300 were
        // applied before the third once in CI)
        Event[] payments = new Event[900];
        for (int i = 0; i < payments.length; i++) {
            payments[i] = payment("p" + i, "a" + i % 20, "a" + (i + 1) % 20, 1);
        }
        db.commitFreshCheckpoint(config, payments);

        try (EffectWorker worker = EffectWorker.startIfConfigured(config, 0, 1, metrics)) {
            while (metrics.effectRetries.getCount() < 3) { // a DBA's pg_cancel_backend, mid-batch
                long retriesBefore = metrics.effectRetries.getCount();
                Eventually.await("the worker is calling the function", PATIENCE, Duration.ofMillis(10),
                        () -> cancelActiveEffects("pg_cancel_backend") > 0);
                // the next cancel waits for this one's retry: a second signal before the backend has acted on
                // the first cancels the same statement once (a cancel that lands as a statement ends misses it)
                Eventually.holdsWithin(Duration.ofSeconds(5), Duration.ofMillis(10),
                        () -> metrics.effectRetries.getCount() > retriesBefore);
            }
            awaitDrained();
        }
        assertThat(metrics.effectRetries.getCount()).as("each cancel was retried").isGreaterThanOrEqualTo(3);
        assertThat(metrics.effectsFailed.getCount()).isZero();
        assertThat(db.effectStatuses().values()).hasSize(900).containsOnly("applied");
        assertThat(total()).isEqualTo(20_000);
        assertThat(balance("a0")).as("each of a0's 45 debits and 45 credits once").isEqualTo(1000);
    }

    @Test
    void aFailedEffectIsCountedByItsGaugeUntilAnOperatorActsAndTheOthersGoOn() throws Exception {
        PostgresSinkConfig config = db.config(sink());
        Map<String, Gauge<?>> gauges = new ConcurrentHashMap<>();
        PostgresSinkMetrics metrics = PostgresSinkMetrics.register(gaugesInto(gauges));
        try (EffectWorker worker = EffectWorker.startIfConfigured(config, 0, 1, metrics)) {
            db.commitFreshCheckpoint(config, BusinessEffectsTest.event("bad", "{\"from\":\"a1\",\"to\":\"a2\","
                    + "\"amount\":1,\"poison\":true}"), payment("p1", "a1", "a2", 10));
            Eventually.await("the failure is counted, the payment applied", PATIENCE, Duration.ofMillis(20),
                    () -> Long.valueOf(1).equals(gauges.get("effectsAwaitingRedrive").getValue())
                            && Long.valueOf(0).equals(gauges.get("effectsQueued").getValue()));
            assertThat(db.effectStatuses()).containsOnly(entry("bad", "failed"), entry("p1", "applied"));
            assertThat((Long) gauges.get("effectWorkerLoopAgeSeconds").getValue()).as("the worker goes round")
                    .isLessThan(5);

            new EffectActions(config.connection(), config.tables(), config.writer(), config.sinkPrefix())
                    .skip(List.of("bad"), "paid by hand");
            Eventually.await("the gauge clears once the operator acted", PATIENCE, Duration.ofMillis(50),
                    () -> Long.valueOf(0).equals(gauges.get("effectsAwaitingRedrive").getValue()));
        }
        assertThat(metrics.effectsFailed.getCount()).as("called once: the workers pass a failed effect by").isOne();
        assertThat(balance("a2")).isEqualTo(1010);
    }

    @Test
    void aWorkerSurvivesAnErrorAndAppliesEveryEffectOnce() throws Exception {
        PostgresSinkConfig config = db.config(sink());
        AtomicInteger errors = new AtomicInteger();
        PostgresSinkMetrics metrics = PostgresSinkMetrics.register(new UnregisteredMetricsGroup() {
            @Override
            public Counter counter(String name) {
                if (!name.equals("effectsApplied")) {
                    return super.counter(name);
                }
                return new SimpleCounter() {
                    @Override
                    public void inc(long n) {
                        if (errors.getAndIncrement() == 0) { // after the calls, before the commit
                            throw new StackOverflowError("an Error out of a library");
                        }
                        super.inc(n);
                    }
                };
            }
        });
        try (EffectWorker worker = EffectWorker.startIfConfigured(config, 0, 1, metrics)) {
            db.commitFreshCheckpoint(config, payment("p1", "a1", "a2", 10), payment("p2", "a2", "a3", 5));
            awaitDrained();
        }
        assertThat(errors.get()).as("the Error was thrown, and the worker went on").isGreaterThan(1);
        assertThat(metrics.effectRetries.getCount()).isOne();
        assertThat(db.effectStatuses()).containsOnly(entry("p1", "applied"), entry("p2", "applied"));
        assertThat(balance("a1") + " " + balance("a2") + " " + balance("a3")).as("each payment once")
                .isEqualTo("990 1005 1005");
    }

    /**
     * A queued effect whose inbox row was deleted by hand: no worker can take it (the take joins the
     * row). Once it has waited over a minute, the gauges count it as stale, not as waiting: without that, the oldest queued effect's
     * age grew for ever and its alert never resolved. When the message comes again its new row adopts
     * the queue entry, and it is applied once.
     */
    @Test
    void aQueuedEffectWhoseInboxRowIsGoneIsCountedStaleNotWaitingUntilItsMessageComesAgain() throws Exception {
        PostgresSinkConfig config = db.config(sink());
        db.commitFreshCheckpoint(config, payment("gone", "a1", "a2", 7), payment("p1", "a1", "a2", 10));
        db.execute("DELETE FROM " + SinkDatabase.TABLE + " WHERE id = 'gone'");
        // stale effects are looked for once something has waited over a minute
        db.execute("UPDATE " + SinkDatabase.TABLE + PostgresTableOptions.EFFECT_QUEUE_SUFFIX
                + " SET queued_at = queued_at - interval '2 minutes' WHERE id = 'gone'");
        Map<String, Gauge<?>> gauges = new ConcurrentHashMap<>();
        try (EffectWorker worker = EffectWorker.startIfConfigured(config, 0, 1,
                PostgresSinkMetrics.register(gaugesInto(gauges)))) {
            Eventually.await("p1 applied, the gone one counted stale", PATIENCE, Duration.ofMillis(20),
                    () -> Long.valueOf(1).equals(gauges.get("staleQueuedEffects").getValue())
                            && Long.valueOf(0).equals(gauges.get("effectsQueued").getValue()));
            assertThat(gauges.get("oldestQueuedEffectSeconds").getValue()).as("nothing waits").isEqualTo(0L);
            assertThat(db.effectStatuses()).containsOnly(entry("p1", "applied"));

            db.commitCheckpoint(config, 2, payment("gone", "a1", "a2", 7));
            Eventually.await("the message came again: applied, nothing stale", PATIENCE, Duration.ofMillis(20),
                    () -> "applied".equals(db.effectStatuses().get("gone"))
                            && Long.valueOf(0).equals(gauges.get("staleQueuedEffects").getValue()));
        }
        assertThat(balance("a2")).as("p1 and the gone payment, each once").isEqualTo(1017);
    }

    /**
     * A new submission replaced the job whose worker is mid-batch (a zombie TaskManager's, or one a
     * cancel did not reach): the registration waits for that batch to commit, and after it the old
     * run's worker applies nothing more, so every effect of the new run is applied with its settings
     * (its function, keys, results topic) by its own workers. Without the batch's run check the old
     * worker applied p2; without the registration's lock the new run registered under the batch.
     */
    @Test
    void aWorkerOfAReplacedRunAppliesNothingMoreAndTheNewRunWaitsForItsBatchInFlight() throws Exception {
        db.execute("CREATE FUNCTION ledger.gated(message_id text, payload jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$"
                + " BEGIN PERFORM pg_advisory_lock_shared(774411); PERFORM pg_advisory_unlock_shared(774411);"
                + " RETURN ledger.apply_payment(message_id, payload); END $$");
        PostgresSinkConfig first = db.config(sink().setEffectFunction("ledger.gated"));
        db.commitFreshCheckpoint(first, payment("p1", "a1", "a2", 10));
        try (Connection gate = PostgresConnections.open(first, "gate"); Statement hold = gate.createStatement()) {
            hold.execute("SELECT pg_advisory_lock(774411)");
            try (EffectWorker replaced = EffectWorker.startIfConfigured(first, 0, 1, PostgresSinkMetrics.unregistered())) {
                Eventually.await("p1's call waits at the gate", PATIENCE, Duration.ofMillis(20), () -> !db.database.rows(
                        "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").isEmpty());
                CompletableFuture<PostgresSinkConfig> second = CompletableFuture.supplyAsync(() -> SinkDatabase.newRun(first));
                Thread.sleep(1_000); // within the test sessions' 2 s lock timeout
                assertThat(second).as("the new run's registration waits for the old run's batch").isNotDone();
                hold.execute("SELECT pg_advisory_unlock(774411)");
                PostgresSinkConfig next = second.get(30, TimeUnit.SECONDS);
                assertThat(db.effectStatuses()).as("the batch in flight committed first").containsEntry("p1", "applied");

                db.commitFreshCheckpoint(next, payment("p2", "a1", "a2", 5));
                Thread.sleep(2_000); // the old run's worker polls every half second
                assertThat(db.effectStatuses()).as("the old run's worker took nothing more").containsEntry("p2", null);
                try (EffectWorker current = EffectWorker.startIfConfigured(next, 0, 1, PostgresSinkMetrics.unregistered())) {
                    Eventually.await("the new run's worker applies p2", PATIENCE, Duration.ofMillis(20),
                            () -> "applied".equals(db.effectStatuses().get("p2")));
                }
            }
        }
        assertThat(balance("a2")).as("p1 and p2, each once").isEqualTo(1015);
    }

    private static UnregisteredMetricsGroup gaugesInto(Map<String, Gauge<?>> gauges) {
        return new UnregisteredMetricsGroup() {
            @Override
            public <T, G extends Gauge<T>> G gauge(String name, G gauge) {
                gauges.put(name, gauge);
                return gauge;
            }
        };
    }

    @Test
    void aPausedWorkerHoldingEffectsAndKeysDoesNotStallTheOthersForLong() throws Exception {
        PostgresSinkConfig config = db.config(sink());
        db.commitFreshCheckpoint(config, payment("p1", "a1", "a2", 10), payment("p2", "a2", "a1", 5));
        // the zombie: a worker session that took the queue rows and the keys, then went silent (SIGSTOP)
        try (Connection zombie = PostgresConnections.open(config, "effects-0");
                Statement statement = zombie.createStatement()) {
            statement.execute("SET idle_in_transaction_session_timeout = " + EffectWorker.IDLE_LIMIT.toMillis());
            zombie.setAutoCommit(false);
            statement.execute("SELECT * FROM " + SinkDatabase.TABLE + "_effect_queue FOR UPDATE");
            statement.execute("SELECT * FROM ledger.accounts WHERE id IN ('a1', 'a2') FOR UPDATE");

            long started = System.nanoTime();
            try (EffectWorker successor = EffectWorker.startIfConfigured(config, 0, 1, PostgresSinkMetrics.unregistered())) {
                awaitDrained();
            }
            assertThat(Duration.ofNanos(System.nanoTime() - started)).as("the server ended the silent session")
                    .isLessThan(EffectWorker.IDLE_LIMIT.plusSeconds(10));
        }
        assertThat(db.effectStatuses()).containsOnly(Map.entry("p1", "applied"), Map.entry("p2", "applied"));
        assertThat(balance("a1")).isEqualTo(995);
    }

    @Test
    void theAtLeastOnceWriterQueuesEffectsAndItsWorkerAppliesEachOnceAcrossReplays() throws Exception {
        PostgresSinkConfig config = db.config(sink());
        for (int replay = 0; replay < 3; replay++) { // the first run, Flink's restart, and another one
            try (PostgresAtLeastOnceWriter writer = new PostgresAtLeastOnceWriter(config, 0, 1,
                    PostgresSinkMetrics.unregistered())) {
                writer.write(payment("p1", "a1", "a2", 10), null);
                writer.write(payment("p2", "a2", "a3", 10), null);
                writer.flush(true);
                awaitDrained();
            }
        }
        assertThat(db.deliveriesById()).containsOnly(Map.entry("p1", 3), Map.entry("p2", 3));
        assertThat(db.effectStatuses()).containsOnly(Map.entry("p1", "applied"), Map.entry("p2", "applied"));
        assertThat(balance("a1")).isEqualTo(990);
        assertThat(balance("a3")).isEqualTo(1010);
    }

    @Test
    void aStartWithoutTheEffectFunctionIsRefusedWhileEffectsAreQueued() throws Exception {
        PostgresSinkConfig config = db.config(sink());
        db.commitFreshCheckpoint(config, payment("p1", "a1", "a2", 10), payment("p2", "a2", "a3", 10));

        assertThatThrownBy(() -> db.config("ledger"))
                .hasMessageContaining("2 effects are still queued in onceflow_events_effect_queue")
                .hasMessageContaining("no effect function (postgres.effect.function)");
        SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered());
        assertThat(db.config("ledger")).as("drained: the effect can go").isNotNull();
    }

    @Test
    void theBacklogGaugesShowQueuedEffectsAndTheirAge() throws Exception {
        PostgresSinkConfig config = db.config(sink());
        db.commitFreshCheckpoint(config, payment("p1", "a1", "a2", 10));
        Map<String, Gauge<?>> gauges = new ConcurrentHashMap<>();
        PostgresSinkMetrics metrics = PostgresSinkMetrics.register(gaugesInto(gauges));
        try (Connection teller = db.database.connect(); Statement statement = teller.createStatement()) {
            teller.setAutoCommit(false);
            statement.execute("SELECT * FROM ledger.accounts WHERE id = 'a2' FOR UPDATE");
            Thread.sleep(1_100);
            try (EffectWorker worker = EffectWorker.startIfConfigured(config, 0, 1, metrics)) {
                Eventually.await("the gauges show the waiting effect", PATIENCE, Duration.ofMillis(20),
                        () -> Long.valueOf(1).equals(gauges.get("effectsQueued").getValue()));
                long age = (Long) gauges.get("oldestQueuedEffectSeconds").getValue();
                assertThat(age).isGreaterThanOrEqualTo(1L);
                // the worker's batch is blocked on the teller's lock and reads no backlog meanwhile: the
                // age must still grow, or an alert on it could never fire for a stuck effect
                Thread.sleep(2_100);
                assertThat((Long) gauges.get("oldestQueuedEffectSeconds").getValue()).as("while the effect is blocked")
                        .isGreaterThanOrEqualTo(age + 2);
                teller.rollback();
                awaitDrained();
            }
        }
    }

    @Test
    void aMissingPrivilegeInsideTheFunctionNamesTheFunctionAndTheFix() {
        String explained = EffectFailures.explain(new SQLException("ERROR: permission denied for table accounts",
                "42501"), "ledger.apply_payment", "onceflow_job");
        assertThat(explained).contains("the role 'onceflow_job' lacks a privilege that ledger.apply_payment needs")
                .contains("permission denied for table accounts").contains("GRANT it to 'onceflow_job'");
        assertThat(io.onceflow.sink.postgres.internal.SqlStates.isAboutTheMessage(new SQLException("canceling statement", "57014"))).isFalse();
        assertThat(io.onceflow.sink.postgres.internal.SqlStates.isAboutTheMessage(new SQLException("raise", "P0001"))).isTrue();
    }

    private void awaitDrained() throws Exception {
        Eventually.await("every queued effect is applied", PATIENCE, Duration.ofMillis(50),
                () -> db.queuedEffects() == 0);
    }

    /** Cancels (or terminates) the effect workers' statements that are running now; returns how many. */
    private int cancelActiveEffects(String how) throws SQLException {
        int[] cancelled = {0};
        db.query("SELECT " + how + "(pid) FROM pg_stat_activity WHERE application_name LIKE 'onceflow-ledger-effects-%'"
                + " AND state = 'active' AND query LIKE '%slow_payment%'", row -> cancelled[0]++);
        return cancelled[0];
    }

    private long total() throws SQLException {
        long[] total = {0};
        db.query("SELECT sum(balance) FROM ledger.accounts", row -> total[0] = row.getBigDecimal(1).longValueExact());
        return total[0];
    }

    private long balance(String account) throws SQLException {
        long[] balance = {0};
        db.query("SELECT balance FROM ledger.accounts WHERE id = '" + account + "'",
                row -> balance[0] = row.getBigDecimal(1).longValueExact());
        return balance[0];
    }
}
