package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.options.EffectResultsTopic;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.onceflow.api.Event;
import io.onceflow.sink.postgres.internal.PostgresConnections;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.EffectWorker;
import io.onceflow.sink.postgres.internal.ResultsPartitionPublisher;
import io.onceflow.sink.postgres.internal.EffectOutcomesTable;
import io.onceflow.sink.postgres.internal.EventsTable;
import io.onceflow.testing.Eventually;
import io.onceflow.tools.audit.PublishedOutcomes;
import io.onceflow.testing.TestKafka;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The results topic, against a real broker and a real server: every outcome of an effect
 * (applied, rejected, failed) reaches the topic once, in each source partition's offset order;
 * a relay that starts again goes on from the cursor Kafka committed with the records, not from
 * what the outbox still holds; a relay whose partition another relay took over publishes nothing.
 */
class EffectResultsTopicTest {
    private static final String FUNCTION = "ledger.decide";
    private static final int PARTITIONS = 3;
    private static final int PER_PARTITION = 40;
    private static final Duration PATIENCE = Duration.ofSeconds(60);
    /** Several relay polls: what a relay that should not publish would have published by then. */
    private static final Duration QUIET = Duration.ofSeconds(1);

    private final SinkDatabase db = new SinkDatabase();
    private final TestKafka kafka = TestKafka.shared();
    private final String resultsTopic = TestKafka.uniqueTopic("results");
    /** The source topic: the cursors are its partitions' offsets in the relay's group, so it exists. */
    private final String sourceTopic = TestKafka.uniqueTopic("payments");

    @BeforeEach
    void createTheFunctionAndTopic() throws Exception {
        db.execute("CREATE SCHEMA ledger");
        db.execute("CREATE FUNCTION " + FUNCTION + "(message_id text, payload jsonb) RETURNS jsonb LANGUAGE plpgsql"
                + " AS $$ BEGIN\n"
                + "  IF payload ? 'fail' THEN RAISE EXCEPTION 'bad data in %', message_id; END IF;\n"
                + "  IF payload ? 'huge' THEN RETURN jsonb_build_object('status', 'applied', 'blob', repeat('x', 2000000));"
                + " END IF;\n"
                + "  IF payload ? 'reject' THEN RETURN jsonb_build_object('status', 'rejected', 'reason', 'no funds'); END IF;\n"
                + "  RETURN jsonb_build_object('status', 'applied', 'id', message_id); END $$");
        kafka.createTopics(2, resultsTopic);
        kafka.createTopics(PARTITIONS, sourceTopic);
    }

    private PostgresSinkConfig config(String prefix) {
        return config(prefix, resultsTopic);
    }

    /** A new run of {@code prefix}, publishing to {@code topic}. */
    private PostgresSinkConfig config(String prefix, String topic) {
        Properties client = new Properties();
        client.setProperty(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
        return db.config(db.builder(prefix).setEffectFunction(FUNCTION).setBatchSize(7)
                .setEffectResults(new EffectResultsTopic(topic, client)));
    }

    /** Every fifth is rejected, every thirteenth fails; the rest are applied. */
    private List<Event> payments() {
        List<Event> events = new ArrayList<>();
        for (int offset = 0; offset < PER_PARTITION; offset++) {
            for (int partition = 0; partition < PARTITIONS; partition++) {
                int n = offset * PARTITIONS + partition;
                String payload = n % 13 == 0 ? "{\"fail\":true}" : n % 5 == 0 ? "{\"reject\":true}" : "{}";
                events.add(new Event("pay-" + partition + "-" + offset, payload.getBytes(StandardCharsets.UTF_8),
                        sourceTopic, partition, offset, 0L, new HashMap<>()));
            }
        }
        return events;
    }

    @Test
    void everyOutcomeIsPublishedOnceInEachPartitionsOffsetOrderByTwoRelays() throws Exception {
        PostgresSinkConfig config = config("results");
        List<Event> events = payments();
        db.commitFreshCheckpoint(config, events.toArray(Event[]::new));

        SinkDatabase.runEffectWorkersUntil(config, 2, "every outcome published", PATIENCE,
                () -> kafka.readCommitted(resultsTopic, Duration.ofSeconds(5)).size() >= events.size());

        Map<String, String> published = publishedStatuses(events.size());
        assertThat(published).hasSize(events.size());
        assertThat(published).isEqualTo(db.effectStatuses());
        assertThat(published.values()).contains("applied", "rejected", "failed");
        assertThat(db.database.rows("SELECT count(*) FROM " + outcomes(config).name()))
                .as("the outbox keeps only each partition's last outcome").containsExactly(String.valueOf(PARTITIONS));
    }

    /** Fails without the cursor in the Kafka transaction (tried: every outcome was published twice). */
    @Test
    void aRelayThatStartsAgainGoesOnFromTheCommittedCursorNotFromTheOutbox() throws Exception {
        PostgresSinkConfig config = config("restart");
        List<Event> events = payments();
        db.commitFreshCheckpoint(config, events.toArray(Event[]::new));
        SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered()); // recorded, none published yet
        String outbox = outcomes(config).name();
        db.execute("CREATE TABLE outbox_copy AS SELECT * FROM " + outbox);

        relayUntilPublished(config, events.size());
        // a relay that died after its Kafka commit and before it marked and trimmed the outbox
        db.execute("DELETE FROM " + outbox);
        db.execute("INSERT INTO " + outbox + " SELECT * FROM outbox_copy");
        relayUntilPublished(config, events.size());
        Thread.sleep(QUIET.toMillis()); // a relay that re-published would have by now

        assertThat(publishedStatuses(events.size())).hasSize(events.size()).isEqualTo(db.effectStatuses());
    }

    /**
     * Kafka drops the offsets of a group without members some time after its last commit: the outbox's
     * mark of the last outcome published is the floor. Fails without it (tried: each partition's last
     * outcome was published again).
     */
    @Test
    void aCursorThatKafkaDroppedIsFloredByTheOutbox() throws Exception {
        PostgresSinkConfig config = config("expired");
        List<Event> events = payments();
        db.commitFreshCheckpoint(config, events.toArray(Event[]::new));
        relayUntilPublished(config, events.size());
        try (Admin admin = Admin.create(Map.of(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers()))) {
            List<String> groups = new ArrayList<>();
            for (int partition = 0; partition < PARTITIONS; partition++) {
                groups.add("onceflow-expired-results-" + sourceTopic + "-" + partition);
            }
            admin.deleteConsumerGroups(groups).all().get(); // as offsets.retention.minutes would
        }
        relayUntilPublished(config, events.size());
        Thread.sleep(QUIET.toMillis());

        assertThat(publishedStatuses(events.size())).hasSize(events.size()).isEqualTo(db.effectStatuses());
    }

    /**
     * An outcome too large for a record is published without its result, and the partition goes on,
     * as do the others; a relay that stops closes its producers and its session.
     */
    @Test
    void anOutcomeTooLargeForARecordGoesOutWithoutItsResultAndAStoppedRelayLeavesNothingOpen() throws Exception {
        PostgresSinkConfig config = config("huge");
        List<Event> events = new ArrayList<>(payments());
        events.add(new Event("pay-huge", "{\"huge\":true}".getBytes(StandardCharsets.UTF_8), sourceTopic, 0,
                PER_PARTITION, 0L, new HashMap<>()));
        db.commitFreshCheckpoint(config, events.toArray(Event[]::new));
        relayUntilPublished(config, events.size());

        Map<String, String> published = publishedStatuses(events.size());
        assertThat(published).containsEntry("pay-huge", "applied");
        assertThat(kafka.readCommitted(resultsTopic, Duration.ofSeconds(5)).stream()
                .filter(record -> new String(record.key(), StandardCharsets.UTF_8).equals("pay-huge"))
                .map(record -> new String(record.value(), StandardCharsets.UTF_8)))
                .singleElement().asString().contains("result_omitted").hasSizeLessThan(1000);
        Thread.sleep(QUIET.toMillis());
        assertThat(Thread.getAllStackTraces().keySet().stream().filter(Thread::isAlive)
                .filter(thread -> thread.getName().contains("onceflow-huge-results-")))
                .as("producer threads of the stopped relay").isEmpty();
        assertThat(db.database.rows("SELECT count(*) FROM pg_stat_activity WHERE application_name = '"
                + PostgresConnections.applicationName("huge", "results-0") + "'")).containsExactly("0");
    }

    /**
     * A bounded job's subtasks end one after another: the last relay to drain publishes every
     * partition, also those another subtask's relay had, which stopped first. Fails with draining
     * relays keeping to their own partitions (tried: the outcomes of relay 0's partitions after it
     * stopped were never published).
     */
    @Test
    void theLastRelayToDrainPublishesThePartitionsOfOnesThatStoppedFirst() throws Exception {
        PostgresSinkConfig config = config("drain");
        List<Event> events = payments();
        List<Event> first = events.subList(0, PARTITIONS * 5);
        db.commitFreshCheckpoint(config, first.toArray(Event[]::new));
        EffectWorker subtask0 = EffectWorker.startIfConfigured(config, 0, 2, PostgresSinkMetrics.unregistered());
        EffectWorker subtask1 = EffectWorker.startIfConfigured(config, 1, 2, PostgresSinkMetrics.unregistered());
        try {
            Eventually.await("the first outcomes published", PATIENCE, Duration.ofMillis(100),
                    () -> kafka.readCommitted(resultsTopic, Duration.ofSeconds(5)).size() >= first.size());
            subtask0.closeAfterDraining();
            List<Event> rest = events.subList(first.size(), events.size());
            db.commitCheckpoint(config, 2, rest.toArray(Event[]::new));
            Eventually.await("subtask 1's worker applied the rest", PATIENCE, Duration.ofMillis(100),
                    () -> db.queuedEffects() == 0);
            subtask1.closeAfterDraining();
        } finally {
            subtask0.close();
            subtask1.close();
        }
        assertThat(publishedStatuses(events.size())).hasSize(events.size()).isEqualTo(db.effectStatuses());
    }

    @Test
    void aRelayWhosePartitionAnotherStartedPublishesNothing() throws Exception {
        PostgresSinkConfig config = config("zombie");
        List<Event> events = payments();
        db.commitFreshCheckpoint(config, events.toArray(Event[]::new));
        SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered());
        TopicPartition partition = new TopicPartition(sourceTopic, 1);
        EffectOutcomesTable outbox = outcomes(config);
        try (Connection connection = PostgresConnections.open(config, "results-test");
                ResultsPartitionPublisher zombie = ResultsPartitionPublisher.start(config, partition, connection, outbox);
                ResultsPartitionPublisher successor = ResultsPartitionPublisher.start(config, partition, connection,
                        outbox)) {
            assertThat(successor.publishUpTo(connection, outbox, Long.MAX_VALUE, 1000)).isTrue();
            assertThat(zombie.cursor()).as("the zombie read the cursor before the successor published").isZero();
            assertThatThrownBy(() -> zombie.publishUpTo(connection, outbox, Long.MAX_VALUE, 1000))
                    .isInstanceOf(ProducerFencedException.class);
        }
        List<String> ids = new ArrayList<>();
        for (ConsumerRecord<byte[], byte[]> record : kafka.readCommitted(resultsTopic, Duration.ofSeconds(5))) {
            ids.add(new String(record.key(), StandardCharsets.UTF_8));
        }
        assertThat(ids).hasSize(PER_PARTITION).doesNotHaveDuplicates().allMatch(id -> id.startsWith("pay-1-"));
    }

    /**
     * A new submission publishes the outcomes to another topic while the replaced run's relay still
     * runs (a zombie TaskManager's): that relay publishes none of the new run's outcomes and does not
     * move the outbox's floor past them, so the new run's relay publishes every one. (From a review:
     * the old relay published them to the old topic and moved the shared floor past them, and the
     * new topic never got them.)
     */
    @Test
    void aReplacedRunsRelayLeavesTheNewRunsOutcomesToTheNewTopic() throws Exception {
        String newTopic = TestKafka.uniqueTopic("moved-results");
        kafka.createTopics(2, newTopic);
        List<Event> events = payments();
        List<Event> before = events.subList(0, PARTITIONS);
        List<Event> after = events.subList(PARTITIONS, 2 * PARTITIONS);
        PostgresSinkConfig replaced = config("moved");
        db.commitFreshCheckpoint(replaced, before.toArray(Event[]::new));
        PostgresSinkConfig next;
        try (EffectWorker zombie = EffectWorker.startIfConfigured(replaced, 0, 1, PostgresSinkMetrics.unregistered())) {
            Eventually.await("the first run's outcomes published", PATIENCE, Duration.ofMillis(100),
                    () -> kafka.readCommitted(resultsTopic, Duration.ofSeconds(3)).size() >= before.size());
            next = config("moved", newTopic);
            db.commitFreshCheckpoint(next, after.toArray(Event[]::new));
            SinkDatabase.drainEffects(next, PostgresSinkMetrics.unregistered()); // the new run's outcomes recorded
            Thread.sleep(3_000); // the zombie's relay polls every 200 ms
        }
        SinkDatabase.runEffectWorkersUntil(next, 1, "the new run's outcomes on its topic", PATIENCE,
                () -> kafka.readCommitted(newTopic, Duration.ofSeconds(3)).size() >= after.size());
        assertThat(kafka.readCommitted(resultsTopic, Duration.ofSeconds(3))).as("the replaced run's topic")
                .hasSize(before.size());
    }

    private void relayUntilPublished(PostgresSinkConfig config, int count) throws Exception {
        try (EffectWorker worker = EffectWorker.startIfConfigured(config, 0, 1, PostgresSinkMetrics.unregistered())) {
            Eventually.await("every outcome published", PATIENCE, Duration.ofMillis(100),
                    () -> kafka.readCommitted(resultsTopic, Duration.ofSeconds(5)).size() >= count
                            && db.database.rows("SELECT count(*) FROM " + outcomes(config).name())
                                    .equals(List.of(String.valueOf(PARTITIONS))));
        }
    }

    private static EffectOutcomesTable outcomes(PostgresSinkConfig config) {
        return new EventsTable(config.tables().events()).outcomes();
    }

    /** Each id's published status, once each checked ({@link PublishedOutcomes}) against the events rows. */
    private Map<String, String> publishedStatuses(int expected) throws Exception {
        PublishedOutcomes published = PublishedOutcomes.read(kafka.bootstrapServers(), resultsTopic, Duration.ofSeconds(5));
        assertThat(published.problems(db.effectStatuses())).isEmpty();
        Map<String, String> statuses = new HashMap<>();
        published.statusesById().forEach((id, all) -> statuses.put(id, all.get(0)));
        assertThat(statuses).hasSize(expected);
        return statuses;
    }

}
