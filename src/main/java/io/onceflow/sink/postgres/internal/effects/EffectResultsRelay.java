package io.onceflow.sink.postgres.internal.effects;

import io.onceflow.sink.postgres.EffectResultsTopic;
import io.onceflow.sink.postgres.internal.PostgresConnections;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.schema.EffectOutcomesTable;
import io.onceflow.sink.postgres.internal.schema.EventsTable;
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
 * ResultsPartitionPublisher}). A partition's cursor (the next outcome number) is the committed offset
 * of the partition in the consumer group {@link EffectResultsTopic#cursorGroup}, committed in the
 * Kafka transaction that publishes the outcomes before it; so a record and the cursor passing it
 * commit together, and a relay that starts again, anywhere, goes on from the cursor.
 *
 * <p>Two relays of one partition (a zombie's, a rescale's) share the partition's transactional id:
 * the later one's start fences the earlier one, whose next commit fails, and each reads the cursor
 * only after its start. So they can take turns, never both publish an outcome. Outcomes are read in
 * {@code seq} order and the table never shows a later one without the earlier ({@link
 * EffectOutcomesTable}), so the cursor never passes one that is yet to come.
 */
@Internal
public final class EffectResultsRelay implements AutoCloseable {
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
    private final Thread thread;
    private volatile boolean running = true;
    /** When the relay stops at the latest after {@link #closeAfterDraining}; 0 otherwise. */
    private volatile long drainDeadline;
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
                try {
                    boolean published = publishOnce();
                    backoffMs = 0;
                    if (!published) {
                        if (drainDeadline != 0) {
                            return; // everything recorded before the input ended is out
                        }
                        sleep(POLL.toMillis());
                    }
                } catch (Exception e) {
                    if (!running) {
                        return;
                    }
                    backoffMs = backoffMs == 0 ? POLL.toMillis() : Math.min(2 * backoffMs, MAX_BACKOFF.toMillis());
                    LOG.warn("{} of sink {}: publishing effect outcomes to {} failed; tried again in {} ms from the"
                            + " committed cursor: {}", name, config.sinkPrefix(), config.effectResults().topic(),
                            backoffMs, e.toString());
                    closeAll();
                    if (drainDeadline != 0 && System.nanoTime() - drainDeadline > 0) {
                        return;
                    }
                    sleep(backoffMs);
                }
            }
        } finally {
            closeAll();
        }
    }

    /** One round over the owned partitions that have outcomes; whether it published any. */
    private boolean publishOnce() throws SQLException {
        if (connection == null) {
            connection = PostgresConnections.open(config, name);
        }
        Map<TopicPartition, Long> heads = new HashMap<>();
        try (PreparedStatement query = connection.prepareStatement(outcomes.headsQuery())) {
            query.setString(1, config.sinkPrefix());
            try (ResultSet rows = query.executeQuery()) {
                while (rows.next()) {
                    TopicPartition source = new TopicPartition(rows.getString(1), rows.getInt(2));
                    if (owns(source, subtaskIndex, parallelism)) {
                        heads.put(source, rows.getLong(3));
                    }
                }
            }
        }
        boolean published = false;
        for (Map.Entry<TopicPartition, Long> head : heads.entrySet()) {
            ResultsPartitionPublisher publisher = publishers.get(head.getKey());
            if (publisher == null) {
                publisher = ResultsPartitionPublisher.start(config, head.getKey());
                publishers.put(head.getKey(), publisher);
            }
            published |= publisher.publishUpTo(connection, outcomes, head.getValue(), MAX_PER_TRANSACTION);
        }
        return published;
    }

    private void closeAll() {
        publishers.values().forEach(ResultsPartitionPublisher::close);
        publishers.clear();
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
     * At the end of a bounded input, after the effect worker drained: publishes what is recorded, then
     * stops; bounded by {@code limit}.
     */
    void closeAfterDraining(Duration limit) {
        drainDeadline = System.nanoTime() + limit.toNanos();
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
