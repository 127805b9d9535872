package io.onceflow.testkit;

import static java.nio.charset.StandardCharsets.UTF_8;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.onceflow.api.EventProcessor;
import io.onceflow.job.Onceflow;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.sink.kafka.OnceflowHeaders;
import io.onceflow.testing.FailureInjector;
import io.onceflow.testing.MiniClusters;
import io.onceflow.testing.PipelineScenario;
import io.onceflow.tools.audit.PublishedOutcomes;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import java.util.concurrent.Future;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;

/**
 * One job to run on test input: your processor in onceflow's whole pipeline (ingest, dedup, the
 * Kafka sinks and, if asked for, the PostgreSQL sink and your effect function), on topics and a
 * database of its own. From {@link OnceflowTestKit#job}; set it up, then {@link #run} it once.
 *
 * <p>The settings are a test's: 300 ms checkpoints, parallelism 2, 4-partition input, the
 * {@code hashmap} state backend, {@code message.max.bytes} 4096 and {@code message.id.max.length}
 * 64; {@link #with} changes any job setting ({@code --help} of the job lists them).
 */
public final class JobUnderTest {
    private static final Duration READ_TIMEOUT = Duration.ofSeconds(60);
    private static final ObjectMapper JSON = new ObjectMapper();
    /** Without pacing a small input drains between two checkpoints and the failure's moment never comes. */
    private static final long FAILURE_RUN_MICROS_PER_EVENT = 500;

    private final PipelineScenario scenario;
    private final EventProcessor processor;
    private final List<String> sql = new ArrayList<>();
    private boolean postgres;
    /** Null unless {@link #withEffectResults()}. */
    private String resultsTopic;
    private long failOnceAfterEvents = -1;
    private boolean ran;

    JobUnderTest(PipelineScenario scenario, EventProcessor processor) {
        this.scenario = scenario;
        this.processor = Objects.requireNonNull(processor, "processor");
    }

    /** Sets one job setting, e.g. {@code with("dedup.ttl", "1h")}. */
    public JobUnderTest with(String key, String value) {
        scenario.with(key, value);
        return this;
    }

    /** Adds the PostgreSQL sink, writing to a database of this run's own. */
    public JobUnderTest withPostgres() {
        if (!postgres) {
            scenario.withPostgres();
            postgres = true;
        }
        return this;
    }

    /**
     * Runs {@code statements} (your schema, your effect function, your reference data) in the run's
     * database before the job starts, in order; adds the PostgreSQL sink.
     */
    public JobUnderTest withSql(String... statements) {
        withPostgres();
        sql.addAll(List.of(statements));
        return this;
    }

    /**
     * Calls {@code function} ({@code postgres.effect.function}: {@code name(message_id text, payload
     * jsonb) RETURNS jsonb}, created by {@link #withSql}) once per id; adds the PostgreSQL sink.
     */
    public JobUnderTest withEffect(String function) {
        withPostgres();
        return with("postgres.effect.function", function);
    }

    /**
     * Publishes the effects' outcomes to a results topic of this run ({@code
     * postgres.effect.results.topic}); {@link Outcomes#publishedOutcomeOf} reads them, and {@link
     * Outcomes#assertExactlyOnce} checks that each decided effect was published once, in its source
     * partition's offset order. Call after {@link #withEffect}.
     */
    public JobUnderTest withEffectResults() {
        resultsTopic = scenario.withEffectResults();
        return this;
    }

    /**
     * Fails the job once, after {@code events} events passed your processor, between a checkpoint's
     * snapshot and its completion (committed output behind, pending output open: the hardest moment),
     * and lets Flink restart it from the last checkpoint. The run paces events so that several
     * checkpoints fall in it; give it a few hundred records after {@code events}, or {@link #run}
     * fails saying the failure never came. Your processor is then called as a plain function: no
     * {@code open}, {@code close} or checkpoint calls.
     */
    public JobUnderTest failOnceAfter(long events) {
        this.failOnceAfterEvents = events;
        return this;
    }

    /** As {@link #run(List)}. */
    public Outcomes run(TestRecord... records) throws Exception {
        return run(List.of(records));
    }

    /**
     * Produces {@code records} to the input topic, runs the job until it has read them all (a
     * bounded source) and reads what it committed.
     *
     * @throws AssertionError if a failure was asked for and did not happen, or the job did not
     *     recover from it
     */
    public Outcomes run(List<TestRecord> records) throws Exception {
        if (ran) {
            throw new IllegalStateException("a JobUnderTest runs once: take another from kit.job(...)");
        }
        ran = true;
        Map<String, String> labelsBySource = produce(records);
        if (postgres) {
            scenario.database().execute(sql.toArray(String[]::new));
        }
        OnceflowConfig config = scenario.config();
        Configuration flink = Onceflow.flinkConfiguration(config);
        flink.addAll(MiniClusters.configuration());
        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(flink);
        Onceflow.job(config, processorToRun()).boundedAtLatestOffsets().defineIn(env);
        env.execute(scenario.name);
        if (failOnceAfterEvents >= 0) {
            checkFailureHappened();
        }
        return readOutcomes(config, labelsBySource);
    }

    private EventProcessor processorToRun() {
        if (failOnceAfterEvents < 0) {
            return processor;
        }
        return new FailureInjector(scenario.name, FailureInjector.Moment.AFTER_SNAPSHOT_BEFORE_COMPLETION,
                failOnceAfterEvents).pacedAt(FAILURE_RUN_MICROS_PER_EVENT).then(processor);
    }

    private void checkFailureHappened() {
        if (!FailureInjector.fired(scenario.name)) {
            throw new AssertionError("the failure after " + failOnceAfterEvents + " events never came: fewer"
                    + " events passed the processor, or the input drained before a checkpoint was pending; give the"
                    + " run a few hundred records more than " + failOnceAfterEvents);
        }
        if (!FailureInjector.restartedAfterFiring(scenario.name)) {
            throw new AssertionError("the job did not restart after the injected failure");
        }
    }

    /** Sends the records; returns each one's label by its "partition/offset". */
    private Map<String, String> produce(List<TestRecord> records) throws Exception {
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = scenario.kafka().newProducer()) {
            for (TestRecord record : records) {
                List<Header> headers = new ArrayList<>();
                record.headers().forEach((name, value) -> headers.add(new RecordHeader(name, value)));
                sent.add(producer.send(new ProducerRecord<>(scenario.inputTopic, null, null, record.key(),
                        record.value(), headers)));
            }
        }
        Map<String, String> labelsBySource = new HashMap<>();
        for (int i = 0; i < records.size(); i++) {
            RecordMetadata metadata = sent.get(i).get();
            labelsBySource.put(metadata.partition() + "/" + metadata.offset(), records.get(i).label());
        }
        return labelsBySource;
    }

    private Outcomes readOutcomes(OnceflowConfig config, Map<String, String> labelsBySource) throws Exception {
        List<String> problems = new ArrayList<>();
        Map<String, List<String>> outputs = new TreeMap<>();
        for (ConsumerRecord<byte[], byte[]> record : scenario.kafka().readCommitted(scenario.outputTopic, READ_TIMEOUT)) {
            outputs.computeIfAbsent(text(record.key()), id -> new ArrayList<>()).add(text(record.value()));
        }
        outputs.forEach((id, values) -> {
            if (values.size() > 1) {
                problems.add("id " + id + ": " + values.size() + " output records");
            }
        });
        Map<String, List<Outcomes.DeadLetter>> deadLetters = new TreeMap<>();
        Map<String, Integer> deadLettersPerSource = new LinkedHashMap<>();
        for (ConsumerRecord<byte[], byte[]> record
                : scenario.kafka().readCommitted(scenario.deadLetterTopic, READ_TIMEOUT)) {
            String source = header(record, OnceflowHeaders.SOURCE_PARTITION) + "/"
                    + header(record, OnceflowHeaders.SOURCE_OFFSET);
            String label = labelsBySource.getOrDefault(source, "unknown input " + source);
            deadLetters.computeIfAbsent(label, l -> new ArrayList<>()).add(new Outcomes.DeadLetter(
                    header(record, OnceflowHeaders.DEAD_LETTER_REASON), header(record, OnceflowHeaders.DEAD_LETTER_ERROR),
                    text(record.value())));
            if (deadLettersPerSource.merge(source, 1, Integer::sum) == 2) {
                problems.add(label + " (input partition/offset " + source + "): more than one dead letter");
            }
        }
        Map<String, Outcomes.Row> rows = new TreeMap<>();
        if (postgres) {
            scenario.database().query("SELECT id, payload::text, deliveries, result::text FROM "
                    + config.postgres().orElseThrow().table(), row -> {
                        Outcomes.Row read = new Outcomes.Row(row.getString(2), row.getInt(3), row.getString(4));
                        rows.put(row.getString(1), read);
                        if (read.deliveries() > 1) {
                            problems.add("id " + row.getString(1) + ": its row was delivered " + read.deliveries()
                                    + " times");
                        }
                    });
        }
        Map<String, List<String>> published = resultsTopic == null ? Map.of() : readPublished(rows, problems);
        return new Outcomes(outputs, deadLetters, rows, published, problems, postgres ? scenario.database() : null);
    }

    /**
     * The statuses published per id on the results topic; adds its breaches to {@code problems}
     * ({@link PublishedOutcomes}).
     */
    private Map<String, List<String>> readPublished(Map<String, Outcomes.Row> rows, List<String> problems)
            throws Exception {
        PublishedOutcomes published = PublishedOutcomes.read(scenario.kafka().bootstrapServers(), resultsTopic,
                READ_TIMEOUT);
        Map<String, String> decided = new TreeMap<>();
        for (Map.Entry<String, Outcomes.Row> row : rows.entrySet()) {
            if (row.getValue().result() != null) {
                String status = JSON.readTree(row.getValue().result()).path("status").asText();
                decided.put(row.getKey(), status.equals("rejected") || status.equals("failed") ? status : "applied");
            }
        }
        problems.addAll(published.problems(decided));
        return published.statusesById();
    }

    private static String header(ConsumerRecord<byte[], byte[]> record, String name) {
        Header header = record.headers().lastHeader(name);
        return header == null ? null : text(header.value());
    }

    private static String text(byte[] bytes) {
        return bytes == null ? null : new String(bytes, UTF_8);
    }
}
