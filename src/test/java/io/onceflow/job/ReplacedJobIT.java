package io.onceflow.job;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.onceflow.config.OnceflowConfig;
import io.onceflow.sink.kafka.PendingKafkaTransactions;
import io.onceflow.sink.postgres.internal.ReplacedRunException;
import io.onceflow.sink.postgres.options.StartMode;
import io.onceflow.testing.Eventually;
import io.onceflow.testing.FailureInjector;
import io.onceflow.testing.MiniClusters;
import io.onceflow.testing.PipelineScenario;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * A second job submitted with the first job's prefixes while the first is between restarts (no
 * writer session is connected, so the live-job check at the second job's start passes): the first
 * job's next attempt must stop before it creates a Kafka producer. Flink's Kafka writer, restoring
 * checkpoint N, initialises transactional ids after N to abort what its previous attempt left open
 * (and, once its first checkpoint completes, onceflow aborts what other attempts left after N,
 * whatever their tag): either would fence the second job's producers, aborting an open transaction
 * (a completed checkpoint's, if its commit had not run yet).
 */
class ReplacedJobIT {
    private static final long RECORDS = 4_000;

    @RegisterExtension
    static final MiniClusterExtension FLINK = MiniClusters.fourSlots();

    @Test
    void aReplacedJobStopsWithoutFencingTheNewJobsKafkaTransactions() throws Exception {
        PipelineScenario scenario = new PipelineScenario("replaced-job").withPostgres();
        scenario.produce(RECORDS, 41);
        OnceflowConfig config = scenario.config();
        // a long restart delay: the window in which job B starts while job A has no writer connected
        JobClient jobA = ExactlyOnceIT.boundedJob(config, new FailureInjector(scenario.name,
                        FailureInjector.Moment.AFTER_COMPLETION, RECORDS / 4).pacedAt(500), Duration.ofSeconds(15))
                .executeAsync("job A");
        Eventually.await("job A's injected failure", Duration.ofMinutes(2), () -> FailureInjector.fired(scenario.name));
        long restored = FailureInjector.lastCompletedWhenFired(scenario.name);

        // job B's main: passes the live-job check once job A's writer sessions have ended
        Eventually.await("job B's run registered while job A is between restarts", Duration.ofSeconds(10),
                Duration.ofMillis(200), () -> registersRun(config));
        // job B's writers restore job A's checkpoint, whose states name job A's attempt: they abort what it
        // left open after the checkpoint (its transactions' records would hold back read_committed consumers)
        PendingKafkaTransactions.abort(config.bootstrapServers(), new Properties(), PendingKafkaTransactions.list(
                config.bootstrapServers(), new Properties(), config.transactionalIdPrefix()));
        List<KafkaProducer<byte[], byte[]>> jobB = new ArrayList<>();
        try {
            for (int subtask = 0; subtask < config.parallelism().orElseThrow(); subtask++) {
                // job B's dead-letter writers' first transactions, named after the checkpoint they restored
                KafkaProducer<byte[], byte[]> producer = transactionalProducer(scenario,
                        config.transactionalIdPrefix() + "-dlq-gjobb0000-" + subtask + "-" + (restored + 1));
                producer.initTransactions();
                producer.beginTransaction();
                producer.send(new ProducerRecord<>(scenario.deadLetterTopic, ("job-b-" + subtask).getBytes(UTF_8),
                        "pending".getBytes(UTF_8)));
                producer.flush();
                jobB.add(producer);
            }

            assertThatThrownBy(() -> jobA.getJobExecutionResult().get(2, TimeUnit.MINUTES))
                    .as("job A fails for good instead of restarting")
                    .hasRootCauseInstanceOf(ReplacedRunException.class)
                    .rootCause().hasMessageContaining("belongs to a newer run");

            for (KafkaProducer<byte[], byte[]> producer : jobB) {
                producer.commitTransaction(); // fenced (ProducerFencedException) if job A's writer touched its id
            }
        } finally {
            jobB.forEach(KafkaProducer::close);
        }
        List<String> committed = new ArrayList<>();
        for (ConsumerRecord<byte[], byte[]> record : scenario.kafka().readCommitted(scenario.deadLetterTopic,
                Duration.ofSeconds(30))) {
            String key = record.key() == null ? "" : new String(record.key(), UTF_8);
            if (key.startsWith("job-b-")) {
                committed.add(key);
            }
        }
        assertThat(committed).as("job B's transactions, committed").containsExactlyInAnyOrder("job-b-0", "job-b-1");
    }

    private static boolean registersRun(OnceflowConfig config) throws Exception {
        try {
            new JobSinks(config).postgres().build().startRun(config.parallelism().orElseThrow(), StartMode.RESTORE, "job B");
            return true;
        } catch (IllegalStateException liveWriters) {
            if (!liveWriters.getMessage().contains("is in use by a running job")) {
                throw liveWriters;
            }
            return false;
        }
    }

    private static KafkaProducer<byte[], byte[]> transactionalProducer(PipelineScenario scenario, String transactionalId) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, scenario.kafka().bootstrapServers());
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        return new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer());
    }
}
