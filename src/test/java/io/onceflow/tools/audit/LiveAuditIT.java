package io.onceflow.tools.audit;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.api.Event;
import io.onceflow.api.EventProcessor;
import io.onceflow.job.Onceflow;
import io.onceflow.cli.ExitCode;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.sink.kafka.OnceflowHeaders;
import io.onceflow.testing.Eventually;
import io.onceflow.testing.MiniClusters;
import io.onceflow.testing.PipelineScenario;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The live audit against the real job, running on a MiniCluster with a real broker and PostgreSQL
 * while a producer keeps writing: with a processor that filters some ids and an id redelivered
 * after its dedup TTL (output twice, the row counts two deliveries), it is clean, counts the filtered
 * ids and reports the redelivery apart; an audit of the whole topics meanwhile warns that the job
 * is running; and once a row is deleted, the live audit finds it missing, exit status 1.
 */
class LiveAuditIT {
    private static final Duration DEDUP_TTL = Duration.ofSeconds(2);
    private static final Duration TIMEOUT = Duration.ofSeconds(60);

    @RegisterExtension
    static final MiniClusterExtension FLINK = MiniClusters.fourSlots();

    /** Drops the ids starting with "drop-" on purpose (emits nothing), passes the rest. */
    static final class DropsSomeIds implements EventProcessor {
        private static final long serialVersionUID = 1L;

        @Override
        public void flatMap(Event event, Collector<Event> out) {
            if (!event.messageId.startsWith("drop-")) {
                out.collect(event);
            }
        }
    }

    @Test
    void aLiveAuditOfTheRunningJobIsCleanWithARedeliveryAfterTheTtlAndCatchesADeletedRow() throws Exception {
        PipelineScenario scenario = new PipelineScenario("live-audit-it").withPostgres()
                .with("dedup.ttl", DEDUP_TTL.toSeconds() + "s");
        OnceflowConfig config = scenario.config();
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(Onceflow.flinkConfiguration(config));
        Onceflow.job(config, new DropsSomeIds()).defineIn(env);
        JobClient job = env.executeAsync(scenario.name);
        ScheduledExecutorService tail = Executors.newSingleThreadScheduledExecutor();
        try (KafkaProducer<byte[], byte[]> producer = scenario.kafka().newProducer()) {
            for (int i = 0; i < 100; i++) {
                send(producer, scenario, "live-" + i);
            }
            for (int i = 0; i < 10; i++) {
                send(producer, scenario, "drop-" + i);
            }
            send(producer, scenario, "again-1");
            awaitOutputs(scenario, "again-1", 1);
            Thread.sleep(DEDUP_TTL.plusSeconds(1).toMillis()); // dedup forgets it: the redelivery passes
            send(producer, scenario, "again-1");
            AtomicInteger tailIds = new AtomicInteger();
            tail.scheduleAtFixedRate(() -> send(producer, scenario, "tail-" + tailIds.incrementAndGet()), 0, 50,
                    TimeUnit.MILLISECONDS);
            awaitOutputs(scenario, "again-1", 2);

            AuditReport live = liveAudit(config);

            assertThat(live.problems()).isEmpty();
            assertThat(live.filteredIds()).isEqualTo(10);
            assertThat(live.redeliveredAfterTtl()).isEqualTo(1);
            assertThat(live.toText()).contains("  after dedup.ttl (2s)      1, e.g. [again-1 x2]\n");
            assertThat(live.uniqueIds()).isGreaterThanOrEqualTo(111);
            assertThat(live.inFlightInputRecords).as("the producer kept writing after the bound").isPositive();
            assertThat(AuditCommand.execute(liveArguments(scenario, "30s"))).isEqualTo(ExitCode.CLEAN);

            Eventually.await("an audit of the whole topics warns that the job runs", TIMEOUT, Duration.ofMillis(200),
                    () -> scenario.audit().warnings().stream().anyMatch(warning -> warning.contains("use --live")));

            scenario.database().execute("DELETE FROM " + config.postgres().orElseThrow().table() + " WHERE id = 'live-5'");
            AuditReport afterDelete = liveAudit(config);
            assertThat(afterDelete.problems())
                    .containsExactly("1 ids with output missing from the PostgreSQL table, e.g. [live-5]");
            assertThat(AuditCommand.execute(liveArguments(scenario, "2s"))).isEqualTo(ExitCode.FINDINGS);
            assertThat(job.getJobStatus().get().isGloballyTerminalState()).as("the job ran throughout").isFalse();
        } finally {
            tail.shutdownNow();
            tail.awaitTermination(10, TimeUnit.SECONDS);
            job.cancel().get(1, TimeUnit.MINUTES);
        }
    }

    private static AuditReport liveAudit(OnceflowConfig config) {
        return AuditCommand.forConfig(config).runLive(TIMEOUT, AuditCommand.liveScope(config, TIMEOUT),
                Duration.ofSeconds(10), config.checkpointInterval());
    }

    private static String[] liveArguments(PipelineScenario scenario, String recheckFor) {
        return Stream.concat(Stream.of("--live", "--recheck-for", recheckFor), Stream.of(scenario.arguments()))
                .toArray(String[]::new);
    }

    private static void send(KafkaProducer<byte[], byte[]> producer, PipelineScenario scenario, String id) {
        producer.send(new ProducerRecord<>(scenario.inputTopic, null, id.getBytes(UTF_8),
                ("{\"id\": \"" + id + "\"}").getBytes(UTF_8),
                List.of(new RecordHeader(OnceflowHeaders.MESSAGE_ID, id.getBytes(UTF_8)))));
        producer.flush();
    }

    private static void awaitOutputs(PipelineScenario scenario, String id, int records) throws Exception {
        Eventually.await(id + " in the output " + records + " times", TIMEOUT, Duration.ofMillis(200), () ->
                scenario.kafka().readCommitted(scenario.outputTopic, TIMEOUT).stream()
                        .filter(record -> id.equals(new String(record.key(), UTF_8))).count() >= records);
    }
}
