package io.onceflow.job;

import io.onceflow.api.Event;
import io.onceflow.api.EventProcessor;
import io.onceflow.api.EventRejectedException;
import io.onceflow.api.TransientProcessingException;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.ingest.DeadLetterReason;
import io.onceflow.sink.kafka.OnceflowHeaders;
import io.onceflow.testing.FailureInjector;
import io.onceflow.testing.MiniClusters;
import io.onceflow.testing.PipelineScenario;
import io.onceflow.tools.audit.AuditReport;
import io.onceflow.tools.generator.GeneratedInput;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;


/**
 * An {@link EventProcessor} that rejects some ids, always fails on others and fails once,
 * transiently and after emitting, on a third kind, with a failure injected at each point of the
 * checkpoint protocol. The oracle counts per message id: each rejected id exactly once in the
 * dead-letter topic as REJECTED_BY_PROCESSOR, each failing id exactly once as PROCESSOR_FAILED, none
 * of them in the output topic or the table; every other id exactly once in the output topic and
 * once in the table with deliveries = 1; the ingest's poison as in {@link ExactlyOnceIT}. The audit
 * command's reconciliation finds the same outcomes, and no problem.
 */
class ProcessorOutcomesIT {
    private static final long RECORDS = 4_000;

    @RegisterExtension
    static final MiniClusterExtension FLINK = MiniClusters.fourSlots();

    @ParameterizedTest
    @EnumSource(FailureInjector.Moment.class)
    void everyIdHasItsOutcomeExactlyOnceDespiteAFailure(FailureInjector.Moment moment) throws Exception {
        PipelineScenario scenario = PipelineScenario.failingAt("po", moment)
                .withPostgres()
                .with("processor.max.attempts", "3")
                .with("processor.retry.backoff", "1ms")
                .with("processor.retry.backoff.max", "2ms");
        GeneratedInput truth = scenario.produce(RECORDS, 11);
        OnceflowConfig config = scenario.config();

        FailureInjector failure = FailureInjector.midRun(scenario.name, moment, RECORDS)
                .then(new BusinessRules(scenario.name));
        ExactlyOnceIT.boundedJob(config, failure).execute(scenario.name);

        assertThat(FailureInjector.fired(scenario.name)).as("the injected failure fired").isTrue();
        assertThat(FailureInjector.restartedAfterFiring(scenario.name)).as("the injected failure restarted the job").isTrue();
        assertOutcomes(scenario, config, truth);
    }

    private static void assertOutcomes(PipelineScenario scenario, OnceflowConfig config, GeneratedInput truth)
            throws Exception {
        Map<String, Integer> outputPerId = ExactlyOnceIT.outputPerId(scenario);
        Map<String, List<String>> processorDeadLettersPerId = new HashMap<>();
        Map<DeadLetterReason, Long> ingestDeadLettersPerReason = new EnumMap<>(DeadLetterReason.class);
        for (ConsumerRecord<byte[], byte[]> record : scenario.kafka().readCommitted(scenario.deadLetterTopic, Duration.ofSeconds(60))) {
            DeadLetterReason reason = DeadLetterReason.valueOf(
                    new String(record.headers().lastHeader(OnceflowHeaders.DEAD_LETTER_REASON).value(), UTF_8));
            if (reason.fromProcessor()) {
                // a dead letter keeps its source record's key, which the generator sets to the message id
                String error = new String(record.headers().lastHeader(OnceflowHeaders.DEAD_LETTER_ERROR).value(), UTF_8);
                processorDeadLettersPerId.computeIfAbsent(new String(record.key(), UTF_8), id -> new ArrayList<>())
                        .add(reason + ": " + error);
            } else {
                ingestDeadLettersPerReason.merge(reason, 1L, Long::sum);
            }
        }
        Map<String, Integer> rowsPerId = rowsPerId(scenario, config);

        Map<BusinessRules.Outcome, Integer> idsPerOutcome = new EnumMap<>(BusinessRules.Outcome.class);
        Map<String, String> wrong = new HashMap<>();
        for (String id : truth.uniqueIds()) {
            BusinessRules.Outcome outcome = BusinessRules.outcome(id);
            idsPerOutcome.merge(outcome, 1, Integer::sum);
            List<String> expectedDeadLetters = switch (outcome) {
                case REJECTED -> List.of("REJECTED_BY_PROCESSOR: rule 0 rejects " + id);
                case FAILS -> List.of(
                        "PROCESSOR_FAILED: java.lang.IllegalStateException: rule 1 fails on " + id + " (after 3 attempts)");
                case FAILS_ONCE, PASSES -> List.of();
            };
            int expectedOutput = expectedDeadLetters.isEmpty() ? 1 : 0;
            String seen = "output " + outputPerId.getOrDefault(id, 0) + ", rows " + rowsPerId.getOrDefault(id, 0)
                    + ", dead letters " + processorDeadLettersPerId.getOrDefault(id, List.of());
            if (!seen.equals("output " + expectedOutput + ", rows " + expectedOutput + ", dead letters " + expectedDeadLetters)) {
                wrong.put(id, outcome + ": " + seen);
            }
        }
        assertThat(wrong.size()).as("ids without their outcome exactly once, e.g. %s",
                wrong.entrySet().stream().limit(5).toList()).isZero();
        assertThat(idsPerOutcome).as("every outcome is tested").hasSize(BusinessRules.Outcome.values().length);
        assertThat(outputPerId.keySet()).as("output ids").isSubsetOf(truth.uniqueIds());
        assertThat(processorDeadLettersPerId.keySet()).as("dead-lettered ids").isSubsetOf(truth.uniqueIds());
        assertThat(rowsPerId.keySet()).as("table ids").isSubsetOf(truth.uniqueIds());
        assertThat(ingestDeadLettersPerReason).isEqualTo(truth.poisonByReason());

        // the audit a team runs in production agrees: every id accounted for, none lost or twice
        AuditReport audit = scenario.audit();
        assertThat(audit.problems()).as("audit problems").isEmpty();
        assertThat(audit.processorDeadLetters()).isEqualTo(Map.of(
                DeadLetterReason.REJECTED_BY_PROCESSOR.name(), (long) idsPerOutcome.get(BusinessRules.Outcome.REJECTED),
                DeadLetterReason.PROCESSOR_FAILED.name(), (long) idsPerOutcome.get(BusinessRules.Outcome.FAILS)));
        assertThat(audit.outputIds()).isEqualTo(idsPerOutcome.get(BusinessRules.Outcome.PASSES)
                + idsPerOutcome.get(BusinessRules.Outcome.FAILS_ONCE));
        assertThat(audit.postgresRows()).isEqualTo(audit.outputIds());
        assertThat(audit.preparedTransactionsLeft()).isZero();
    }

    /** How many rows of each id the table has; an id with deliveries > 1 counts as that many. */
    private static Map<String, Integer> rowsPerId(PipelineScenario scenario, OnceflowConfig config) throws Exception {
        Map<String, Integer> rowsPerId = new HashMap<>();
        try (Connection connection = scenario.database().connect();
                Statement statement = connection.createStatement();
                ResultSet rows = statement.executeQuery(
                        "SELECT id, deliveries FROM " + config.postgres().orElseThrow().table())) {
            while (rows.next()) {
                rowsPerId.merge(rows.getString(1), rows.getInt(2), Integer::sum);
            }
        }
        return rowsPerId;
    }

    /**
     * Business rules keyed by the id's hash: a twentieth of the ids is rejected, one fails on every
     * attempt, one fails transiently on its first attempt after emitting its output, the rest pass.
     * Only the first attempt per id fails transiently, kept in a static set per scenario (one JVM).
     */
    static final class BusinessRules implements EventProcessor {
        private static final long serialVersionUID = 1L;
        private static final Map<String, Set<String>> FAILED_ONCE = new ConcurrentHashMap<>();

        enum Outcome { REJECTED, FAILS, FAILS_ONCE, PASSES }

        private final String scenario;

        BusinessRules(String scenario) {
            this.scenario = scenario;
            FAILED_ONCE.put(scenario, ConcurrentHashMap.newKeySet());
        }

        static Outcome outcome(String id) {
            switch (Math.floorMod(id.hashCode(), 20)) {
                case 0:
                    return Outcome.REJECTED;
                case 1:
                    return Outcome.FAILS;
                case 2:
                    return Outcome.FAILS_ONCE;
                default:
                    return Outcome.PASSES;
            }
        }

        @Override
        public void flatMap(Event event, Collector<Event> out) {
            switch (outcome(event.messageId)) {
                case REJECTED:
                    throw new EventRejectedException("rule 0 rejects " + event.messageId);
                case FAILS:
                    throw new IllegalStateException("rule 1 fails on " + event.messageId);
                case FAILS_ONCE:
                    out.collect(event);
                    if (FAILED_ONCE.get(scenario).add(event.messageId)) {
                        throw new TransientProcessingException("rule 2 fails once on " + event.messageId);
                    }
                    return;
                default:
                    out.collect(event);
            }
        }
    }
}
