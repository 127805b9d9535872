package io.onceflow.sink.postgres.internal;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import org.apache.flink.annotation.Internal;
import org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Internal. Publishes the recorded outcomes of effects ({@link EffectOutcomesTable}) to the results
 * topic, exactly once: one thread per writer subtask, each relaying the source partitions that hash
 * to its subtask, each partition through its own transactional producer ({@link
 * ResultsPartitionPublisher}), whose transactions carry the outcomes and move the partition's cursor
 * together; so a relay that starts again, anywhere, goes on from the cursor.
 *
 * <p>Two relays of one partition (a zombie's, a rescale's, two draining ones) share the partition's
 * transactional id: the later one's start fences the earlier one, whose next commit fails, and each
 * reads the cursor only after its start. So they can take turns, never both publish an outcome.
 * Outcomes are read in {@code seq} order and the table never shows a later one without the earlier
 * ({@link EffectOutcomesTable}), so the cursor never passes one that is yet to come. A partition that
 * fails (its broker is away, a record is refused) waits with a backoff of its own; the others go on.
 */
@Internal
final class EffectResultsRelay implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(EffectResultsRelay.class);
    static final Duration POLL = Duration.ofMillis(200);
    static final int MAX_PER_TRANSACTION = 500;
    private static final Duration MAX_BACKOFF = Duration.ofSeconds(30);

    private final PostgresSinkConfig config;
    private final EffectOutcomesTable outcomes;
    private final int subtaskIndex;
    private final int parallelism;
    private final String name;
    private final Map<TopicPartition, ResultsPartitionPublisher> publishers = new HashMap<>();
    /** Per partition that failed: its last backoff and when it is tried again (nanoTime). */
    private final Map<TopicPartition, long[]> retries = new HashMap<>();
    private final Thread thread;
    private volatile boolean running = true;
    /** Whether the input ended ({@link #closeAfterDraining}), and when (nanoTime). */
    private volatile boolean draining;
    private volatile long drainRequested;
    private Connection connection;

    EffectResultsRelay(PostgresSinkConfig config, int subtaskIndex, int parallelism) {
        this.config = config;
        this.outcomes = new EventsTable(config.tables().events()).outcomes();
        this.subtaskIndex = subtaskIndex;
        this.parallelism = parallelism;
        this.name = "results-" + subtaskIndex;
        this.thread = new Thread(this::run, "onceflow-" + config.sinkPrefix() + "-" + name);
        this.thread.setDaemon(true);
    }

    /** Starts the relay of subtask {@code subtaskIndex} of {@code parallelism}, or returns null without a results topic. */
    static EffectResultsRelay startIfConfigured(PostgresSinkConfig config, int subtaskIndex, int parallelism) {
        if (config.effectResults() == null) {
            return null;
        }
        EffectResultsRelay relay = new EffectResultsRelay(config, subtaskIndex, parallelism);
        relay.thread.start();
        return relay;
    }

    /** Whether this subtask relays the source partition: each partition has one relay at a given parallelism. */
    static boolean owns(TopicPartition source, int subtaskIndex, int parallelism) {
        return Math.floorMod(Objects.hash(source.topic(), source.partition()), parallelism) == subtaskIndex;
    }

    private void run() {
        long backoffMs = 0;
        try {
            while (running) {
                long roundStarted = System.nanoTime();
                boolean drainedBefore = draining;
                try {
                    boolean published = publishOnce();
                    backoffMs = 0;
                    if (!published) {
                        if (drainedBefore && roundStarted - drainRequested >= 0 && retries.isEmpty()) {
                            return; // a round that began after the input ended found nothing left, nor waiting
                        }
                        sleep(POLL.toMillis());
                    }
                } catch (ReplacedRunException e) {
                    LOG.warn("{}: {}", name, e.getMessage());
                    return;
                } catch (SQLException | RuntimeException e) { // the database: every partition waits
                    if (!running) {
                        return;
                    }
                    backoffMs = doubled(backoffMs);
                    LOG.warn("{} of sink {}: reading the outcomes to publish failed; tried again in {} ms: {}", name,
                            config.sinkPrefix(), backoffMs, e.toString());
                    closeConnection();
                    sleep(backoffMs);
                }
            }
        } finally {
            closeAll();
        }
    }

    private static long doubled(long backoffMs) {
        return backoffMs == 0 ? POLL.toMillis() : Math.min(2 * backoffMs, MAX_BACKOFF.toMillis());
    }

    /** One round over the partitions to relay that have outcomes; whether it published any. */
    private boolean publishOnce() throws SQLException {
        if (connection == null) {
            connection = PostgresConnections.open(config, name);
        }
        // a replaced run's relay stops (and is refused at each mark)
        SinkRuns.refuseIfReplacedUntilCommit(connection, config.schema().runs(), config.sinkPrefix(), config.run());
        // once the input ended, every partition: a relay whose subtask finished first relays no more
        boolean all = draining;
        Map<TopicPartition, Long> heads = new HashMap<>();
        try (PreparedStatement query = connection.prepareStatement(outcomes.headsQuery())) {
            query.setString(1, config.sinkPrefix());
            try (ResultSet rows = query.executeQuery()) {
                while (rows.next()) {
                    TopicPartition source = new TopicPartition(rows.getString(1), rows.getInt(2));
                    if (all || owns(source, subtaskIndex, parallelism)) {
                        heads.put(source, rows.getLong(3));
                    }
                }
            }
        }
        boolean published = false;
        for (Map.Entry<TopicPartition, Long> head : heads.entrySet()) {
            published |= publish(head.getKey(), head.getValue());
        }
        return published;
    }

    /** Publishes what {@code source} has after its cursor; a failure makes that partition alone wait. */
    private boolean publish(TopicPartition source, long head) throws SQLException {
        long[] retry = retries.get(source);
        if (retry != null && System.nanoTime() - retry[1] < 0) {
            return false;
        }
        try {
            ResultsPartitionPublisher publisher = publishers.get(source);
            if (publisher == null) {
                publisher = ResultsPartitionPublisher.start(config, source, connection, outcomes);
                publishers.put(source, publisher);
            }
            boolean published = publisher.publishUpTo(connection, outcomes, head, MAX_PER_TRANSACTION);
            retries.remove(source);
            return published;
        } catch (ReplacedRunException e) {
            throw e;
        } catch (RuntimeException e) {
            if (!running) {
                throw e;
            }
            long backoffMs = doubled(retry == null ? 0 : retry[0]);
            retries.put(source, new long[] {backoffMs, System.nanoTime() + backoffMs * 1_000_000});
            LOG.warn("{} of sink {}: publishing the outcomes of {} to {} failed; that partition is tried again in {} ms"
                    + " from its committed cursor, the others go on: {}", name, config.sinkPrefix(), source,
                    config.effectResults().topic(), backoffMs, e.toString());
            closeQuietly(publishers.remove(source));
            return false;
        }
    }

    private void closeAll() {
        Thread.interrupted(); // a close's interrupt must not stop the producers' own close
        publishers.values().forEach(EffectResultsRelay::closeQuietly);
        publishers.clear();
        closeConnection();
    }

    private static void closeQuietly(ResultsPartitionPublisher publisher) {
        if (publisher == null) {
            return;
        }
        try {
            publisher.close();
        } catch (RuntimeException e) {
            LOG.debug("Closing a results producer failed", e);
        }
    }

    private void closeConnection() {
        if (connection != null) {
            try {
                connection.close();
            } catch (SQLException e) {
                LOG.debug("Closing the results relay's connection failed", e);
            }
            connection = null;
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

    /**
     * At the end of a bounded input, after the effect worker drained: publishes what is recorded, of
     * every partition, then stops; bounded by {@code limit}.
     */
    void closeAfterDraining(Duration limit) {
        drainRequested = System.nanoTime();
        draining = true;
        try {
            thread.join(limit.toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        close();
    }

    /** Stops the relay; an open transaction is aborted, and what it held is published by the next relay. */
    @Override
    public void close() {
        running = false;
        thread.interrupt();
        try {
            thread.join(EffectWorker.IDLE_LIMIT.toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (thread.isAlive()) {
            LOG.warn("{} of sink {} did not stop within {}", name, config.sinkPrefix(), EffectWorker.IDLE_LIMIT);
        }
    }
}
