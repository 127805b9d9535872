package io.onceflow.job;

import io.onceflow.api.EventProcessor;
import io.onceflow.job.Onceflow;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.ingest.DeadLetterReason;
import io.onceflow.sink.kafka.OnceflowHeaders;
import io.onceflow.testing.FailureInjector;
import io.onceflow.testing.MiniClusters;
import io.onceflow.testing.PipelineScenario;
import io.onceflow.tools.audit.AuditReport;
import io.onceflow.tools.generator.GeneratedInput;
import java.sql.SQLException;
import java.time.Duration;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.Map;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;


/**
 * Kafka in; Kafka and PostgreSQL out, exactly once, with a failure injected at each point of the
 * checkpoint protocol. The oracle counts per message id against the generator's ground truth: each
 * valid id exactly once in the output topic (read_committed) and once in the table with
 * deliveries = 1, each poison record exactly once in the dead-letter topic with its reason, and no
 * prepared transaction left behind.
 */
class ExactlyOnceIT {
    private static final long RECORDS = 6_000;

    @RegisterExtension
    static final MiniClusterExtension FLINK = MiniClusters.fourSlots();

    @ParameterizedTest
    @EnumSource(FailureInjector.Moment.class)
    void everyIdExactlyOnceDespiteAFailure(FailureInjector.Moment moment) throws Exception {
        PipelineScenario scenario = PipelineScenario.failingAt("eo", moment)
                .withPostgres();
        GeneratedInput truth = scenario.produce(RECORDS, 7);
        OnceflowConfig config = scenario.config();

        FailureInjector failure = FailureInjector.midRun(scenario.name, moment, RECORDS);
        StreamExecutionEnvironment env = boundedJob(config, failure);
        env.execute(scenario.name);

        assertThat(FailureInjector.fired(scenario.name)).as("the injected failure fired").isTrue();
        assertThat(FailureInjector.restartedAfterFiring(scenario.name)).as("the injected failure restarted the job").isTrue();
        assertExactlyOnce(scenario, truth);
    }

    /** The job over the scenario's input as it is now, ending when it has read all of it. */
    static StreamExecutionEnvironment boundedJob(OnceflowConfig config, EventProcessor processor)
            throws SQLException {
        return boundedJob(config, processor, Duration.ofMillis(500));
    }

    /** As {@link #boundedJob(OnceflowConfig, EventProcessor)}, waiting {@code restartDelay} before each restart. */
    static StreamExecutionEnvironment boundedJob(OnceflowConfig config, EventProcessor processor, Duration restartDelay)
            throws SQLException {
        Configuration flink = Onceflow.flinkConfiguration(config);
        flink.set(RestartStrategyOptions.RESTART_STRATEGY, "fixed-delay");
        // enough attempts to outlast a PostgreSQL or broker restart
        flink.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_ATTEMPTS, 20);
        flink.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_DELAY, restartDelay);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(flink);
        Onceflow.job(config, processor).boundedAtLatestOffsets().defineIn(env);
        return env;
    }

    /** How often each message id is in the output topic (read_committed). */
    static Map<String, Integer> outputPerId(PipelineScenario scenario) {
        Map<String, Integer> outputPerId = new HashMap<>();
        for (ConsumerRecord<byte[], byte[]> record : scenario.kafka().readCommitted(scenario.outputTopic, Duration.ofSeconds(60))) {
            outputPerId.merge(new String(record.key(), UTF_8), 1, Integer::sum);
        }
        return outputPerId;
    }

    static void assertExactlyOnce(PipelineScenario scenario, GeneratedInput truth) {
        Map<String, Integer> outputPerId = outputPerId(scenario);
        Map<String, Integer> wrongCounts = new HashMap<>();
        for (String id : truth.uniqueIds()) {
            int count = outputPerId.getOrDefault(id, 0);
            if (count != 1) {
                wrongCounts.put(id, count);
            }
        }
        assertThat(wrongCounts.size())
                .as("ids whose output count is not 1, e.g. %s", wrongCounts.entrySet().stream().limit(5).toList())
                .isZero();
        assertThat(outputPerId).as("output ids").hasSameSizeAs(truth.uniqueIds());

        Map<DeadLetterReason, Long> deadLettersPerReason = new EnumMap<>(DeadLetterReason.class);
        for (ConsumerRecord<byte[], byte[]> record : scenario.kafka().readCommitted(scenario.deadLetterTopic, Duration.ofSeconds(60))) {
            String reason = new String(record.headers().lastHeader(OnceflowHeaders.DEAD_LETTER_REASON).value(), UTF_8);
            deadLettersPerReason.merge(DeadLetterReason.valueOf(reason), 1L, Long::sum);
        }
        assertThat(deadLettersPerReason).isEqualTo(truth.poisonByReason());

        AuditReport audit = scenario.audit();
        assertThat(audit.problems()).isEmpty();
        if (audit.postgresAudited()) {
            assertThat(audit.postgresRows()).isEqualTo(truth.uniqueIds().size());
            assertThat(audit.maxDeliveries()).isEqualTo(1);
            assertThat(audit.preparedTransactionsLeft()).isZero();
        }
        assertThat(audit.uniqueIds()).isEqualTo(truth.uniqueIds().size());
        assertThat(audit.duplicateRecords()).isEqualTo(truth.duplicates());
    }
}
