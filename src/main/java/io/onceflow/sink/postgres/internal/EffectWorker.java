package io.onceflow.sink.postgres.internal;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import org.apache.flink.annotation.Internal;
import org.postgresql.PGConnection;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Internal. Applies the queued effects of a sink, off the task thread: one per writer subtask, on a
 * thread and a connection of its own, in {@link EffectBatch} transactions, until the queue is
 * empty; then it waits for the committer's notification that a transaction committed (or polls).
 * A slow or blocked effect delays results, never checkpoints or ingest.
 *
 * <p>Workers share the queue: each batch takes the oldest effects of a source partition no other
 * batch holds ({@link EffectBatch}: a lock per partition for the transaction, the partitions in
 * turn), so any worker of any attempt of any run on the same events table applies any effect, none
 * is stranded by a rescale or a restart, a worker never passes an effect that another holds or
 * retries, and a partition's effects are called in offset order. A zombie's worker (a paused
 * TaskManager that wakes up) is harmless: an effect leaves the queue in the transaction that
 * applies it. Its transaction never waits for the client longer than {@link #IDLE_LIMIT}: the server
 * ends a paused worker's session, releasing its locks for the others.
 *
 * <p>Failures: only an error about one message's data is a verdict on it ({@link EffectFailures});
 * anything else (an {@link Error} too: a worker never dies while its task runs, and the {@code
 * effectWorkerLoopAgeSeconds} gauge shows that it goes round) rolls the batch back and is tried
 * again with exponential backoff (up to {@link #MAX_BACKOFF}), logged with what to do, one effect at
 * a time at first (the batch doubles again with each success). When that one effect fails too, its
 * partition is set aside, with a backoff of its own: the effect is retried, and effects of other
 * partitions go on meanwhile instead of waiting behind it (one partition's order is kept).
 */
@Internal
public final class EffectWorker implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(EffectWorker.class);
    /** Longest a worker's transaction may wait for its client; below the default lock_timeout. */
    public static final Duration IDLE_LIMIT = Duration.ofSeconds(5);
    static final Duration IDLE_POLL = Duration.ofMillis(500);
    static final Duration MIN_BACKOFF = Duration.ofMillis(100);
    static final Duration MAX_BACKOFF = Duration.ofSeconds(30);
    /** Longest a worker whose input ended keeps applying the queue before it stops. */
    static final Duration FINAL_DRAIN_LIMIT = Duration.ofMinutes(10);

    private final PostgresSinkConfig config;
    private final String name;
    private final EffectBatch batch;
    private final PendingEffectsTable queue;
    private final String functions;
    private final int maxBatch;
    private final PostgresSinkMetrics metrics;
    private final Thread thread;
    private volatile boolean running = true;
    /** When a worker told that the input ended ({@link #closeAfterDraining}) stops at the latest; 0 otherwise. */
    private volatile long drainDeadline;
    private final EffectBacklog backlog;
    /** When the worker's loop last came round (nanoTime): after a batch, a wait, or a failure handled. */
    private volatile long loopNanos = System.nanoTime();
    private volatile Connection connection;
    private final PartitionsSetAside setAside = new PartitionsSetAside(MIN_BACKOFF, MAX_BACKOFF);
    /** Whether the events table still has the index of pending effects of an earlier version. */
    private boolean legacyPending;
    private final EffectServerWatch server;
    /** Publishes the outcomes of this subtask's share of the partitions; null without a results topic. */
    private EffectResultsRelay relay;
    /** Why the worker applies nothing any more (the server changed under it, a newer run replaced it), or null. */
    private volatile String stopped;

    private EffectWorker(PostgresSinkConfig config, int subtaskIndex, PostgresSinkMetrics metrics) {
        EventsTable events = new EventsTable(config.tables().events());
        this.config = config;
        this.name = "effects-" + subtaskIndex;
        this.queue = events.queue();
        this.batch = EffectBatch.of(config, metrics);
        this.functions = config.tables().effectFunction()
                + (config.tables().effectKeys() == null ? "" : " (or its keys function " + config.tables().effectKeys() + ")");
        this.maxBatch = config.writer().batchSize();
        this.metrics = metrics;
        this.backlog = new EffectBacklog(queue);
        this.server = new EffectServerWatch(config);
        metrics.reportEffectBacklog(backlog::queued, backlog::oldestQueuedSeconds, backlog::awaitingRedrive,
                backlog::stale, () -> (System.nanoTime() - loopNanos) / 1_000_000_000L);
        this.thread = new Thread(this::run, "onceflow-" + config.sinkPrefix() + "-" + name);
        this.thread.setDaemon(true);
    }

    /**
     * Starts the worker of subtask {@code subtaskIndex} of {@code parallelism} of the sink configured by
     * {@code config}, with its results relay if the sink has a results topic ({@link
     * EffectResultsRelay}), or returns null if it has no effect.
     */
    public static EffectWorker startIfConfigured(PostgresSinkConfig config, int subtaskIndex, int parallelism,
            PostgresSinkMetrics metrics) {
        if (config.tables().effectFunction() == null) {
            return null;
        }
        EffectWorker worker = new EffectWorker(config, subtaskIndex, metrics);
        worker.thread.start();
        worker.relay = EffectResultsRelay.startIfConfigured(config, subtaskIndex, parallelism);
        return worker;
    }

    private void run() {
        try {
            drainWhileRunning();
        } finally {
            closeConnection();
        }
    }

    private void drainWhileRunning() {
        int limit = maxBatch;
        long backoffMs = 0;
        while (running) {
            loopNanos = System.nanoTime();
            try {
                Connection session = connection();
                if (stopped != null) {
                    if (drainDeadline != 0) {
                        return; // the input ended: what is queued stays for the restart
                    }
                    refreshBacklog(session, false);
                    sleep(IDLE_POLL.toMillis());
                    continue;
                }
                int taken;
                try {
                    taken = batch.run(session, limit, setAside.now());
                } finally {
                    // before the reconnect's check: a batch whose COMMIT failed may have committed
                    server.committed(batch.lastTransactionId());
                }
                refreshBacklog(session, taken == 0 && drainDeadline != 0);
                if (batch.headPartition() != null) {
                    setAside.succeeded(batch.headPartition());
                }
                backoffMs = 0;
                limit = Math.min(maxBatch, limit * 2);
                if (taken == 0) {
                    if (drainDeadline != 0 && (nothingToCall(session) || System.nanoTime() - drainDeadline > 0)) {
                        return;
                    }
                    awaitWork(session);
                }
            } catch (ReplacedRunException e) {
                stopped = e.getMessage();
                LOG.warn("{}: {}", name, stopped);
            } catch (SQLException e) {
                if (!running) {
                    return;
                }
                metrics.effectRetries.inc();
                // 57P01: an administrator (or a failover's fencing) ended the session
                boolean connectionLost = SqlStates.isConnectionLost(e);
                if (connectionLost) {
                    closeConnection();
                }
                refreshBacklogIfConnected();
                String head = batch.headPartition();
                String explained = EffectFailures.explain(e, functions, config.connection().user());
                if (limit == 1 && head != null && !connectionLost) {
                    // the effect failed alone: it waits, its partition with it; the others go on
                    long wait = setAside.failed(head);
                    LOG.warn("{} of sink {}: the first effect queued in partition {} failed; it and its partition wait"
                            + " {} ms, other partitions go on: {}", name, config.sinkPrefix(), head, wait, explained);
                    sleep(MIN_BACKOFF.toMillis());
                } else {
                    // one at a time next, to tell the effect that fails from the batch it was in
                    limit = 1;
                    backoffMs = doubled(backoffMs);
                    LOG.warn("{} of sink {}: the effect transaction failed and is tried again in {} ms, one effect at"
                            + " first: {}", name, config.sinkPrefix(), backoffMs, explained);
                    sleep(backoffMs);
                }
            } catch (Throwable e) { // an Error too: a worker that died would leave the queue unapplied, silently
                if (!running) {
                    return;
                }
                metrics.effectRetries.inc();
                closeConnection();
                limit = 1;
                backoffMs = doubled(backoffMs);
                LOG.error("{} of sink {} failed unexpectedly; its transaction is rolled back and tried again in {} ms",
                        name, config.sinkPrefix(), backoffMs, e);
                sleep(backoffMs);
            }
        }
    }

    /** The next wait after a failure: {@link #MIN_BACKOFF} first, then doubled up to {@link #MAX_BACKOFF}. */
    private static long doubled(long backoffMs) {
        return backoffMs == 0 ? MIN_BACKOFF.toMillis() : Math.min(2 * backoffMs, MAX_BACKOFF.toMillis());
    }

    private Connection connection() throws SQLException {
        if (connection == null) {
            Connection opened = PostgresConnections.open(config, name);
            try (Statement statement = opened.createStatement()) {
                // a paused worker's transaction must not hold its keys and rows for as long as the pause
                statement.execute("SET idle_in_transaction_session_timeout = " + IDLE_LIMIT.toMillis());
                statement.execute("LISTEN \"" + queue.notifyChannel() + "\"");
                // before the connection is the worker's: a check that fails (without the connection
                // failing) must not leave it in place for the next turn to apply effects on, unchecked
                checkServer(opened);
            } catch (SQLException e) {
                PostgresConnections.closeQuietly(opened, e);
                throw e;
            }
            connection = opened;
            legacyPending = EffectQueueStartChecks.hasLegacyIndex(opened, queue);
            refreshBacklog(opened, true);
        }
        return connection;
    }

    /** At each connection: a server that changed under the worker stops it applying effects ({@link EffectServerWatch}). */
    private void checkServer(Connection session) throws SQLException {
        List<String> signs = server.changes(session);
        if (!signs.isEmpty() && stopped == null) {
            stopped = String.join("; ", signs);
            LOG.error("{} of sink {}: the PostgreSQL server changed under this worker ({}). Effects it applied may be"
                    + " queued again here, with their changes lost, and applying them again could give another"
                    + " outcome. It applies no effect: check what the effects applied before the failover did"
                    + " (docs/failover.md, \"Effects after a failover\"), then submit the job again (stop it with a"
                    + " savepoint, resume from it): the new run records this server, and its workers apply what is"
                    + " queued.", name, config.sinkPrefix(), stopped);
        }
    }

    /**
     * Whether no queued effect is left to call, rows whose events row is gone (never taken) aside:
     * for the end of a bounded input, once a batch found nothing.
     */
    private boolean nothingToCall(Connection session) throws SQLException {
        try (PreparedStatement query = session.prepareStatement(queue.toCallQuery());
                ResultSet count = query.executeQuery()) {
            count.next();
            return count.getLong(1) == 0;
        }
    }

    /** Until a committer's notification, {@link #IDLE_POLL}, or {@link #close}. */
    private void awaitWork(Connection session) throws SQLException {
        long deadline = System.nanoTime() + IDLE_POLL.toNanos();
        PGConnection pg = session.unwrap(PGConnection.class);
        while (running && System.nanoTime() < deadline) {
            var notifications = pg.getNotifications(50);
            if (notifications != null && notifications.length > 0) {
                return;
            }
        }
    }

    private void refreshBacklog(Connection session, boolean now) throws SQLException {
        if (!now && !backlog.due()) {
            return;
        }
        if (legacyPending) {
            // rows that an earlier version's prepared transactions committed after the upgrade's start
            EffectQueueStartChecks.queueLegacyPending(session, queue, config.sinkPrefix(), config.tables().effectFunction());
        }
        backlog.read(session);
    }

    /**
     * After a failed batch: the backlog as it is now, if the session still works. A worker whose
     * batches keep failing would otherwise report the backlog of its last success for ever.
     */
    private void refreshBacklogIfConnected() {
        Connection session = connection;
        if (session == null) {
            return;
        }
        try {
            refreshBacklog(session, true);
        } catch (SQLException e) {
            LOG.debug("{} of sink {} could not read the effect backlog", name, config.sinkPrefix(), e);
        }
    }

    private void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            running = false;
        }
    }

    private void closeConnection() {
        if (connection != null) {
            try {
                connection.close();
            } catch (SQLException e) {
                LOG.debug("Closing a failed effects connection failed too", e);
            }
            connection = null;
        }
    }

    /**
     * At the end of a bounded input: applies what is queued (including other workers' leftovers,
     * once free) before stopping, so that a bounded run ends with its effects applied; a streaming
     * job's workers never stop for this. Bounded by {@link #FINAL_DRAIN_LIMIT}; what is left stays
     * queued for the next start. A cancelled task (Flink interrupts its thread) stops waiting.
     */
    public void closeAfterDraining() {
        drainDeadline = System.nanoTime() + FINAL_DRAIN_LIMIT.toNanos();
        try {
            thread.join(FINAL_DRAIN_LIMIT.toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (backlog.queued() > 0) {
            LOG.warn("{} of sink {} stops with {} effects still queued; the next start of the job applies them", name,
                    config.sinkPrefix(), backlog.queued());
        }
        if (relay != null) {
            relay.closeAfterDraining(FINAL_DRAIN_LIMIT);
        }
        close();
    }

    /**
     * Stops the worker: its transaction in flight is cancelled and rolled back, its effects stay
     * queued for the next worker.
     */
    @Override
    public void close() {
        if (relay != null) {
            relay.close();
        }
        running = false;
        thread.interrupt();
        Connection session = connection;
        if (session != null) {
            try {
                session.unwrap(PGConnection.class).cancelQuery();
            } catch (SQLException e) {
                LOG.debug("Cancelling the effects in flight failed", e);
            }
        }
        try {
            thread.join(IDLE_LIMIT.toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (thread.isAlive()) {
            LOG.warn("{} of sink {} did not stop within {}; its transaction ends with its session", name,
                    config.sinkPrefix(), IDLE_LIMIT);
            closeConnection();
        }
    }
}
