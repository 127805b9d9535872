package io.onceflow.testing;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.config.OnceflowConfig;
import io.onceflow.tools.audit.AuditCommand;
import io.onceflow.tools.audit.AuditReport;
import io.onceflow.tools.generator.EventGenerator;
import io.onceflow.tools.generator.GeneratedInput;
import io.onceflow.tools.generator.GeneratorSpec;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.UUID;
import java.util.stream.Stream;
import org.apache.flink.core.execution.JobClient;
import org.apache.kafka.clients.producer.KafkaProducer;

/**
 * One test's own topics on the shared broker (and, optionally, its own database on the shared
 * PostgreSQL server), the job configuration that points at them, and the means to produce generated
 * input and audit the outputs per message id.
 */
public final class PipelineScenario {
    /** Small limits keep the oversized and over-long poison records cheap. */
    private static final int MAX_MESSAGE_BYTES = 4096;
    private static final int MAX_ID_LENGTH = 64;

    public final String name;
    public final String inputTopic;
    public final String outputTopic;
    public final String deadLetterTopic;
    private final TestKafka kafka;
    private final Map<String, String> settings = new HashMap<>();
    private TestPostgres.TestDatabase database;

    public PipelineScenario(String purpose) {
        this.kafka = TestKafka.shared();
        this.name = purpose + "-" + UUID.randomUUID().toString().substring(0, 8);
        this.inputTopic = name + "-in";
        this.outputTopic = name + "-out";
        this.deadLetterTopic = name + "-dlq";
        kafka.createTopics(4, inputTopic, outputTopic);
        kafka.createTopics(2, deadLetterTopic);
        settings.put("kafka.bootstrap.servers", kafka.bootstrapServers());
        settings.put("input.topics", inputTopic);
        settings.put("input.group.id", name);
        settings.put("output.topic", outputTopic);
        settings.put("dead.letter.topic", deadLetterTopic);
        settings.put("kafka.transactional.id.prefix", name);
        settings.put("message.max.bytes", String.valueOf(MAX_MESSAGE_BYTES));
        settings.put("message.id.max.length", String.valueOf(MAX_ID_LENGTH));
        settings.put("checkpoint.interval", "300ms");
        settings.put("checkpoint.timeout", "1min");
        settings.put("kafka.transaction.timeout", "5min");
        // a MiniCluster restarts in its own process: no TaskManager to lose, slots at hand, short delays
        settings.put("restart.budget", "1min");
        settings.put("state.backend", "hashmap");
        settings.put("parallelism", "2");
    }

    /** Adds the PostgreSQL sink, writing to a fresh database of the shared test server. */
    public PipelineScenario withPostgres() {
        return withPostgres(TestPostgres.shared().newDatabase());
    }

    /**
     * Adds the PostgreSQL sink, writing to {@code database} (maybe shared with another scenario) into
     * a table of this scenario's own; the commit log table is the database's one.
     */
    public PipelineScenario withPostgres(TestPostgres.TestDatabase database) {
        this.database = database;
        String base = name.replace('-', '_');
        // the effect queue's name adds 13 characters to the table's: stay within PostgreSQL's 63
        settings.put("postgres.table", (base.length() > 43 ? base.substring(0, 34) + base.substring(base.length() - 9)
                : base) + "_events");
        // unique per scenario (the name ends with a random part) and within the 40 characters allowed
        settings.put("postgres.sink.prefix", "s_" + name.substring(name.length() - 8));
        settings.put("postgres.url", database.jdbcUrl());
        settings.put("postgres.user", database.user());
        settings.put("postgres.password", database.password());
        return this;
    }

    /** The scenario's database; only after {@link #withPostgres()}. */
    public TestPostgres.TestDatabase database() {
        if (database == null) {
            throw new IllegalStateException("call withPostgres() first");
        }
        return database;
    }

    /**
     * Publishes the effects' outcomes to a topic of this scenario's own ({@code
     * postgres.effect.results.topic}, 2 partitions), which {@link #audit()} then checks; returns it.
     */
    public String withEffectResults() {
        String topic = name + "-results";
        if (!topic.equals(settings.get("postgres.effect.results.topic"))) {
            kafka.createTopics(2, topic);
            settings.put("postgres.effect.results.topic", topic);
        }
        return topic;
    }

    /** Overrides one setting of the job configuration. */
    public PipelineScenario with(String key, String value) {
        settings.put(key, value);
        return this;
    }

    /**
     * A scenario, named after {@code purpose} and {@code moment}, whose checkpoints suit a failure at
     * {@code moment}: several in a run, or, for "before the first checkpoint", a first one that surely
     * comes after the data starts flowing. Flink schedules the first checkpoint at a random time
     * between checkpoint.min.pause and checkpoint.interval after the start, and the source took up to
     * 9 s to deliver on a loaded machine.
     */
    public static PipelineScenario failingAt(String purpose, FailureInjector.Moment moment) {
        PipelineScenario scenario = new PipelineScenario(purpose + "-" + moment.name().toLowerCase().replace('_', '-'));
        if (moment == FailureInjector.Moment.BEFORE_FIRST_CHECKPOINT) {
            return scenario.with("checkpoint.interval", "15s").with("checkpoint.min.pause", "15s");
        }
        return scenario.with("checkpoint.interval", "300ms");
    }

    public OnceflowConfig config() {
        return OnceflowConfig.fromMap(settings, Map.of());
    }

    /** The settings as a command's arguments ({@code --key value ...}), for a command-line tool's {@code execute}. */
    public String[] arguments() {
        return settings.entrySet().stream().flatMap(setting -> Stream.of("--" + setting.getKey(), setting.getValue()))
                .toArray(String[]::new);
    }

    /** Produces {@code records} generated records (10% duplicates, 2% poison) with the given seed. */
    public GeneratedInput produce(long records, long seed) {
        return produce(records, 0.10, 0.02, 0, seed);
    }

    /** Produces generated records sized to the configured limits, so poison is poison for this job. */
    public GeneratedInput produce(long records, double duplicateRatio, double poisonRatio, int payloadBytes, long seed) {
        OnceflowConfig config = config();
        GeneratorSpec spec = new GeneratorSpec(records, duplicateRatio, poisonRatio, payloadBytes,
                config.maxMessageBytes(), config.maxIdLength(), seed);
        try (KafkaProducer<byte[], byte[]> producer = kafka.newProducer()) {
            return new EventGenerator(spec).produce(producer, inputTopic);
        }
    }

    /** Audits the scenario's topics, classifying input with the job's own deserializer settings. */
    public AuditReport audit() {
        return AuditCommand.forConfig(config()).run(Duration.ofSeconds(60));
    }

    public TestKafka kafka() {
        return kafka;
    }

    /**
     * Waits, up to 90 s, until the committed output holds at least {@code records} records while
     * {@code job} (an unbounded one) runs; fails at once if the job has ended before.
     */
    public void awaitOutput(JobClient job, long records) throws Exception {
        Eventually.await("output caught up within 90 s", Duration.ofSeconds(90), Duration.ofMillis(500), () -> {
            if (kafka.readCommitted(outputTopic, Duration.ofSeconds(30)).size() >= records) {
                return true;
            }
            assertThat(job.getJobStatus().get().isGloballyTerminalState()).as("job still running").isFalse();
            return false;
        });
    }
}
