package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.options.EffectResultsTopic;
import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.api.Event;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.EffectWorker;
import io.onceflow.sink.postgres.internal.EventsTable;
import io.onceflow.testing.DocumentedGrants;
import io.onceflow.testing.Eventually;
import io.onceflow.testing.TestKafka;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;

/**
 * The results relay starting again and stopping, against a real broker and server (from the second
 * review of the results topic): with the grants docs/deploy.md documents, a relay that starts again
 * goes on publishing; a relay whose input ended does not stop while a partition waits out its backoff.
 */
class EffectResultsRestartTest {
    private final SinkDatabase db = new SinkDatabase();
    private final TestKafka kafka = TestKafka.shared();
    private final String resultsTopic = TestKafka.uniqueTopic("results");
    private final String sourceTopic = TestKafka.uniqueTopic("payments");

    private EffectResultsTopic results() {
        Properties client = new Properties();
        client.setProperty(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
        return new EffectResultsTopic(resultsTopic, client);
    }

    private List<Event> events(int partitions, int from, int to) {
        List<Event> events = new ArrayList<>();
        for (int offset = from; offset < to; offset++) {
            for (int partition = 0; partition < partitions; partition++) {
                events.add(new Event("pay-" + partition + "-" + offset, "{}".getBytes(StandardCharsets.UTF_8),
                        sourceTopic, partition, offset, 0L, new HashMap<>()));
            }
        }
        return events;
    }

    private int published() {
        return kafka.readCommitted(resultsTopic, Duration.ofSeconds(5)).size();
    }

    /** Failed while the grants left out the UPDATE that marks the outbox (tried: nothing after the restart). */
    @Test
    void aRelayWithTheDocumentedGrantsStartsAgain() throws Exception {
        String job = DocumentedGrants.apply(db.database);
        kafka.createTopics(1, resultsTopic);
        kafka.createTopics(1, sourceTopic);
        PostgresSinkConfig config = SinkDatabase.config(db.builderAs("grantsres", job)
                .setEffectFunction(DocumentedGrants.EFFECT).setEffectResults(results()));
        db.commitFreshCheckpoint(config, events(1, 0, 10).toArray(Event[]::new));
        try (EffectWorker worker = EffectWorker.startIfConfigured(config, 0, 1, PostgresSinkMetrics.unregistered())) {
            Eventually.await("the first outcomes published", Duration.ofSeconds(60), Duration.ofMillis(100),
                    () -> published() >= 10);
        }
        PostgresSinkConfig second = SinkDatabase.newRun(config);
        db.commitFreshCheckpoint(second, events(1, 10, 20).toArray(Event[]::new));
        try (EffectWorker worker = EffectWorker.startIfConfigured(second, 0, 1, PostgresSinkMetrics.unregistered())) {
            Eventually.await("the next outcomes published by a relay that started again", Duration.ofSeconds(30),
                    Duration.ofMillis(200), () -> published() >= 20);
        }
        assertThat(db.database.rows("SELECT count(*) FROM " + new EventsTable(config.tables().events()).outcomes().name()))
                .as("outbox trimmed").containsExactly("1");
    }

    /**
     * A partition fenced for 3 s by another producer of its transactional id (a zombie's restarts)
     * while the input ends: the draining relay waits for it. Failed with the relay stopping at the
     * first round that published nothing (tried: 80 of 120).
     */
    @Test
    void aDrainingRelayDoesNotStopWhileAPartitionWaitsOutItsBackoff() throws Exception {
        kafka.createTopics(1, resultsTopic);
        kafka.createTopics(3, sourceTopic);
        db.execute("CREATE FUNCTION drain_effect(message_id text, payload jsonb) RETURNS jsonb LANGUAGE sql"
                + " AS $$ SELECT jsonb_build_object('status', 'applied') $$");
        PostgresSinkConfig config = db.config(db.builder("drainfence").setEffectFunction("drain_effect")
                .setEffectResults(results()));
        List<Event> events = events(3, 0, 40);
        db.commitFreshCheckpoint(config, events.toArray(Event[]::new));
        SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered()); // recorded, none published yet

        AtomicBoolean fencing = new AtomicBoolean(true);
        Thread fencer = new Thread(() -> {
            Properties properties = new Properties();
            properties.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
            properties.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "onceflow-drainfence-results-" + sourceTopic + "-1");
            properties.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
            properties.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
            while (fencing.get()) {
                try (KafkaProducer<byte[], byte[]> zombie = new KafkaProducer<>(properties)) {
                    zombie.initTransactions();
                } catch (RuntimeException e) {
                    // fenced in turn: go on
                }
            }
        });
        fencer.start();
        Thread stopFencing = new Thread(() -> {
            try {
                Thread.sleep(3000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            fencing.set(false);
        });
        stopFencing.start();
        try {
            EffectWorker worker = EffectWorker.startIfConfigured(config, 0, 1, PostgresSinkMetrics.unregistered());
            Thread.sleep(100);
            worker.closeAfterDraining(); // while partition 1 is fenced: the relay must wait for it
        } finally {
            fencing.set(false);
            stopFencing.join();
            fencer.join();
        }
        assertThat(published()).as("outcomes published when the drained relay stopped").isEqualTo(events.size());
    }
}
