package io.onceflow.tools.demo;

import static java.nio.charset.StandardCharsets.UTF_8;

import io.onceflow.api.Event;
import io.onceflow.api.EventProcessor;
import io.onceflow.api.EventRejectedException;
import io.onceflow.job.Onceflow;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.ingest.DeadLetterReason;
import io.onceflow.sink.kafka.OnceflowHeaders;
import io.onceflow.testing.FailureInjector;
import io.onceflow.testing.Ledger;
import io.onceflow.testing.PipelineScenario;
import io.onceflow.tools.audit.AuditReport;
import io.onceflow.tools.generator.EventGenerator;
import io.onceflow.tools.generator.GeneratedInput;
import java.math.BigDecimal;
import java.sql.Connection;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.apache.flink.api.common.JobStatus;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The README's first command: onceflow end to end on one machine with nothing installed but a JDK
 * and Maven. Starts a real Kafka broker (embedded KRaft) and a real PostgreSQL server, produces
 * payments and orders with duplicates and poison, runs the job in a Flink MiniCluster, kills it once
 * mid-run, shows progress, and ends with the per-id audit of the output topic, the dead-letter topic
 * and the PostgreSQL table. The PostgreSQL sink applies each payment to a ledger of accounts
 * ({@link Ledger}: its effect function runs once per new message id), and the demo ends by checking
 * every balance to the cent. Its processor ({@link ReviewRule}) rejects some events and fails on a
 * few, so the audit shows those outcomes too. Exits 1 when any id is lost or has two outcomes, or a
 * balance is off.
 */
public final class Demo {
    private static final long DEFAULT_RECORDS = 100_000;
    /** Enough for the ~5 payments of 1.00 to 99.99 an account gets from 100k records. */
    private static final BigDecimal OPENING_BALANCE = new BigDecimal("400.00");

    private Demo() {}

    public static void main(String[] args) throws Exception {
        long records = args.length > 0 ? Long.parseLong(args[0]) : DEFAULT_RECORDS;
        say("starting an embedded Kafka broker (KRaft) and PostgreSQL 17...");
        PipelineScenario scenario = new PipelineScenario("demo")
                .withPostgres()
                .with("message.max.bytes", "16384")
                .with("message.id.max.length", "128")
                .with("checkpoint.interval", "2s")
                .with("state.backend", "rocksdb")
                .with("postgres.effect.function", Ledger.FUNCTION).with("postgres.effect.keys", Ledger.KEYS);
        OnceflowConfig config = scenario.config();
        try (Connection ledger = scenario.database().connect()) {
            Ledger.install(ledger);
            Ledger.openAccounts(ledger, EventGenerator.ACCOUNTS, OPENING_BALANCE, true);
        }
        say("opened a ledger of accounts 1.." + EventGenerator.ACCOUNTS + " (every " + Ledger.UNKNOWN_EVERY
                + "th missing, every " + Ledger.SMALL_EVERY + "th with 1.00); each payment debits its account"
                + " through the effect function " + Ledger.FUNCTION);
        say("configuration: " + config);

        say("producing " + records + " payments and orders (~10% re-sent duplicates, ~1% poison) to " + scenario.inputTopic);
        GeneratedInput truth = scenario.produce(records, 0.10, 0.01, 200, 2026);
        say("produced: " + truth);

        String failureScenario = scenario.name + "-failure";
        FailureInjector failure = new FailureInjector(
                failureScenario, FailureInjector.Moment.AFTER_SNAPSHOT_BEFORE_COMPLETION, truth.uniqueIds().size() * 2L / 5)
                .then(new ReviewRule());
        say("the processor rejects 1 id in " + ReviewRule.REJECT_ONE_IN + " (REJECTED_BY_PROCESSOR) and throws on 1 in "
                + ReviewRule.FAIL_ONE_IN + " (PROCESSOR_FAILED after " + config.processorRetries().maxAttempts()
                + " attempts): both go to the dead-letter topic, and the audit counts them as outcomes");
        Configuration flink = Onceflow.flinkConfiguration(config);
        flink.set(RestartStrategyOptions.RESTART_STRATEGY, "fixed-delay");
        flink.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_ATTEMPTS, 3);
        flink.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_DELAY, Duration.ofSeconds(1));
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(flink);
        Onceflow.job(config, failure).boundedAtLatestOffsets().defineIn(env);
        say("running the job on a Flink MiniCluster (parallelism 2, checkpoint every 2 s); one failure will be"
                + " injected after a checkpoint's snapshot and before its completion notice");
        JobClient job = env.executeAsync(Onceflow.jobName(config));
        CompletableFuture<?> done = job.getJobExecutionResult();
        long uniqueIds = truth.uniqueIds().size();
        try (CommittedOutcomes outcomes = new CommittedOutcomes(scenario.kafka().bootstrapServers(),
                scenario.outputTopic, scenario.deadLetterTopic)) {
            while (!done.isDone()) {
                waitUpTo(done, Duration.ofSeconds(2));
                say(String.format("job %-10s %s", statusOf(job), outcomes.poll(uniqueIds)));
            }
            done.get();
            // the final checkpoint's commit is visible by now; show it before the audit
            say("job finished; " + outcomes.poll(uniqueIds));
        }
        say(FailureInjector.restartedAfterFiring(failureScenario)
                ? "the injected failure fired and the job restarted from its last completed checkpoint"
                : "!! the injected failure did not fire: this run proves less than it should");
        say("auditing every id (read_committed)...");
        AuditReport report = scenario.audit();
        System.out.println();
        System.out.println(report.toText());
        Ledger.Report money;
        try (Connection ledger = scenario.database().connect()) {
            money = Ledger.audit(ledger, config.postgres().orElseThrow().table());
        }
        System.out.println("LEDGER: " + money);
        boolean clean = report.clean() && money.clean();
        System.out.println(clean ? "DEMO: clean: every id has exactly one outcome, and every balance matches its unique applied payments to the cent"
                : "DEMO: NOT CLEAN");
        System.exit(clean ? 0 : 1);
    }

    /** The demo's business logic: a rejection rule and a bug, each on a fixed share of the ids. */
    static final class ReviewRule implements EventProcessor {
        static final int REJECT_ONE_IN = 200;
        static final int FAIL_ONE_IN = 5000;
        private static final long serialVersionUID = 1L;

        @Override
        public void flatMap(Event event, Collector<Event> out) {
            int bucket = Math.floorMod(event.messageId.hashCode(), REJECT_ONE_IN * FAIL_ONE_IN);
            if (bucket % REJECT_ONE_IN == 0) {
                throw new EventRejectedException("flagged for review by the demo's rule");
            }
            if (bucket % FAIL_ONE_IN == 1) {
                throw new IllegalStateException("the demo's deliberate bug");
            }
            out.collect(event);
        }
    }

    private static void waitUpTo(CompletableFuture<?> future, Duration timeout) throws InterruptedException {
        try {
            future.get(timeout.toMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException | ExecutionException notYetOrFailed) {
            // the caller looks at the future again; a failure surfaces from its final get()
        }
    }

    private static String statusOf(JobClient job) {
        try {
            return job.getJobStatus().get(2, TimeUnit.SECONDS).name();
        } catch (Exception e) {
            return JobStatus.FINISHED.name();
        }
    }

    private static void say(String line) {
        System.out.println("[demo] " + line);
    }

    /**
     * The outcomes a read_committed consumer sees so far: output records, and the dead letters the
     * processor gave (its rejections and failures are outcomes too); ingest's dead letters are poison
     * records, which have no id.
     */
    private static final class CommittedOutcomes implements AutoCloseable {
        private final KafkaConsumer<byte[], byte[]> consumer;
        private final String outputTopic;
        private long outputRecords;
        private long processorDeadLetters;

        CommittedOutcomes(String bootstrapServers, String outputTopic, String deadLetterTopic) {
            Properties props = new Properties();
            props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers);
            props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
            consumer = new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer());
            this.outputTopic = outputTopic;
            List<TopicPartition> partitions = Stream.of(outputTopic, deadLetterTopic)
                    .flatMap(topic -> consumer.partitionsFor(topic).stream()
                            .map(p -> new TopicPartition(topic, p.partition())))
                    .toList();
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
        }

        /** Reads what became visible since the last call, until a poll comes back empty. */
        String poll(long uniqueIds) {
            ConsumerRecords<byte[], byte[]> batch;
            do {
                batch = consumer.poll(Duration.ofMillis(200));
                for (ConsumerRecord<byte[], byte[]> record : batch) {
                    if (record.topic().equals(outputTopic)) {
                        outputRecords++;
                    } else if (fromProcessor(record)) {
                        processorDeadLetters++;
                    }
                }
            } while (!batch.isEmpty());
            return String.format("committed outcomes: %,d of %,d unique ids (%,d output records, %,d dead letters"
                    + " of the processor)", outputRecords + processorDeadLetters, uniqueIds, outputRecords,
                    processorDeadLetters);
        }

        private static boolean fromProcessor(ConsumerRecord<byte[], byte[]> deadLetter) {
            Header reason = deadLetter.headers().lastHeader(OnceflowHeaders.DEAD_LETTER_REASON);
            return reason != null && Stream.of(DeadLetterReason.values())
                    .anyMatch(known -> known.fromProcessor() && known.name().equals(new String(reason.value(), UTF_8)));
        }

        @Override
        public void close() {
            consumer.close();
        }
    }
}
