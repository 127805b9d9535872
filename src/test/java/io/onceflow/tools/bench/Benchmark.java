package io.onceflow.tools.bench;

import io.onceflow.config.OnceflowConfig;
import io.onceflow.testing.Ledger;
import io.onceflow.testing.PipelineScenario;
import io.onceflow.testing.ProjectFlinkConf;
import io.onceflow.testing.TestKafka;
import io.onceflow.testing.TestPostgres;
import io.onceflow.tools.generator.EventGenerator;
import io.onceflow.tools.generator.GeneratedInput;
import io.onceflow.tools.generator.GeneratorSpec;
import java.io.IOException;
import java.math.BigDecimal;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.stream.Stream;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.MemorySize;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.configuration.TaskManagerOptions;
import org.apache.flink.configuration.WebOptions;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.kafka.clients.producer.KafkaProducer;

/**
 * The benchmark command ({@code mvn -Pbench verify}, see docs/benchmarks.md): on one machine, in one
 * run, over the same generated input, measures the raw limit (Kafka copy + COPY, no Flink), the job
 * with at-least-once sinks (ours, and flink-connector-jdbc's JdbcSink for PostgreSQL), the job with
 * exactly-once sinks (also with 200 ms checkpoints and with a business effect), two Kafka-only
 * exactly-once systems (a Kafka Streams dedup, Kafka's transactional copier), the raw limit and
 * exactly-once again with 1 KB and 10 KB payloads, and the exactly-once job with 1M and 10M ids
 * already tracked in dedup state, and a hand-written inbox consumer with the one-UPDATE effect's
 * function (the effect path's peer, no Flink); prints
 * a table and the ratios, and optionally writes JSON.
 *
 * <p>Everything runs on embedded services: the Kafka broker and the Flink MiniCluster inside this
 * JVM, PostgreSQL as a separate server process (durable unless {@code bench.postgres.durable=false}),
 * the Kafka-only systems as child JVMs. CPU is this JVM's plus its children's plus PostgreSQL's, so it
 * includes the broker's work and the benchmark's own clients. Timings are for ratios within one run
 * on one machine, never for assertions.
 */
public final class Benchmark {
    /** Partitions of the input topic (and of every output topic: PipelineScenario's). */
    static final int INPUT_PARTITIONS = 4;
    /** Managed memory of the MiniCluster's TaskManager, shared by the RocksDB instances of its slots. */
    private static final MemorySize MANAGED_MEMORY = MemorySize.parse("512m");
    private static final int CHECKPOINT_HISTORY = 10_000;
    private static final long INPUT_SEED = 2026;
    private static final long WARM_UP_RECORDS = 300_000;
    private static final long BACKEND_EXIT_MILLIS = 500;
    /** No payment of the input can be short of funds, so every payment to a known account is applied. */
    private static final BigDecimal LEDGER_OPENING_BALANCE = new BigDecimal("100000000.00");
    /** The effect of the "effect-one-update" scenario: one UPDATE of the payment's account. */
    static final String ONE_UPDATE_EFFECT = "bench.debit";
    static final String ONE_UPDATE_EFFECT_SQL = "CREATE SCHEMA IF NOT EXISTS bench;"
            + " CREATE OR REPLACE FUNCTION " + ONE_UPDATE_EFFECT + "(message_id text, payload jsonb) RETURNS jsonb"
            + " LANGUAGE plpgsql AS $$ DECLARE debited int; BEGIN"
            + " IF payload->>'type' IS DISTINCT FROM 'payment' THEN RETURN '{\"status\": \"applied\"}'; END IF;"
            + " UPDATE ledger.accounts SET balance = balance - (payload->>'amount')::numeric"
            + " WHERE id = (payload->>'user_id')::bigint AND balance >= (payload->>'amount')::numeric;"
            + " GET DIAGNOSTICS debited = ROW_COUNT;"
            + " RETURN CASE WHEN debited = 1 THEN '{\"status\": \"applied\"}'::jsonb"
            + " ELSE '{\"status\": \"rejected\", \"reason\": \"no such account\"}'::jsonb END; END $$";
    /** The effect of the "effect-scaling" scenario: bound by the wall clock, and it updates its account. */
    static final String SLEEP_EFFECT = "bench.sleep_effect";
    /** As {@link #SLEEP_EFFECT}, and one payment in 20 also pays a fee to the one fee account. */
    static final String SLEEP_EFFECT_WITH_FEE = "bench.sleep_effect_with_fee";
    /**
     * Sleeps 2 ms in PostgreSQL, debits a payment's account (declared as its key, {@link Ledger#KEYS})
     * and records when it ran ({@code at}, the server's clock, read by {@link JobScenario#runTimedEffects}).
     * The fee variant credits one hot fee account as the example's ledger does: a journal line (an
     * INSERT, no key), never an update of one shared row.
     */
    static final String SLEEP_EFFECT_SQL = "CREATE SCHEMA IF NOT EXISTS bench;"
            + " CREATE TABLE IF NOT EXISTS bench.fee_lines (message_id text PRIMARY KEY, amount numeric NOT NULL);"
            + " CREATE OR REPLACE FUNCTION bench.sleep_debit(payload jsonb) RETURNS void LANGUAGE plpgsql AS $$ BEGIN"
            + " PERFORM pg_sleep(0.002);"
            + " IF payload->>'type' = 'payment' THEN UPDATE ledger.accounts SET balance = balance - 0.01"
            + " WHERE id = ledger.account_id(payload->'user_id'); END IF; END $$;"
            + " CREATE OR REPLACE FUNCTION " + SLEEP_EFFECT + "(message_id text, payload jsonb) RETURNS jsonb"
            + " LANGUAGE plpgsql AS $$ BEGIN PERFORM bench.sleep_debit(payload);"
            + " RETURN jsonb_build_object('status', 'applied', 'at', clock_timestamp()); END $$;"
            + " CREATE OR REPLACE FUNCTION " + SLEEP_EFFECT_WITH_FEE + "(message_id text, payload jsonb) RETURNS jsonb"
            + " LANGUAGE plpgsql AS $$ BEGIN PERFORM bench.sleep_debit(payload);"
            + " IF payload->>'type' = 'payment' AND abs(hashtext(message_id)) % 20 = 0 THEN"
            + " INSERT INTO bench.fee_lines VALUES (message_id, 0.01); END IF;"
            + " RETURN jsonb_build_object('status', 'applied', 'at', clock_timestamp()); END $$";

    private Benchmark() {}

    public static void main(String[] args) {
        int status = 0;
        try {
            run();
        } catch (Throwable t) {
            t.printStackTrace();
            status = 1;
        }
        // Either way: the embedded services' threads would keep the JVM, and Maven, waiting forever.
        System.exit(status);
    }

    private static void run() throws Exception {
        BenchSettings settings = BenchSettings.fromSystemProperties();
        say("settings: " + settings);
        // before the server starts (postgresPid below), and for this JVM only: the tests keep fsync off
        System.setProperty(TestPostgres.DURABLE_PROPERTY, String.valueOf(settings.postgresDurable()));
        say("starting the embedded Kafka broker and PostgreSQL...");
        TestKafka kafka = TestKafka.shared();
        ResourceMeter meter = new ResourceMeter(postgresPid());
        if (!meter.measuresPostgres()) {
            say("PostgreSQL's process is not visible here: CPU figures cover this JVM only");
        }
        Path work = Files.createTempDirectory("onceflow-bench");

        String inputTopic = TestKafka.uniqueTopic("bench-in");
        GeneratedInput input = produceInput(kafka, inputTopic, settings, settings.events(), INPUT_SEED);
        long uniqueIds = input.uniqueIds().size();
        say("produced the input: " + input);

        List<ScenarioResult> results = new ArrayList<>();
        // checks that fail the run, after its report: the figures of a run that got the ledger wrong mean nothing
        List<String> failures = new ArrayList<>();
        Optional<TestPostgres.TestDatabase> oneUpdateLedger = Optional.empty();
        if (settings.scenarios().contains(BenchSettings.RAW)) {
            results.add(rawLimit(Report.RAW_LIMIT, kafka, inputTopic, settings.events(), meter));
        }
        MiniCluster cluster = startMiniCluster(settings.parallelism());
        try {
            if (settings.scenarios().stream().anyMatch(BenchSettings.JOB_SCENARIOS::contains)) {
                warmUp(kafka, cluster, settings, meter, work);
            }
            Workload workload = new Workload(settings, inputTopic, settings.events(), uniqueIds, meter, work);
            JobScenario jobs = new JobScenario(cluster, workload);
            // ABBA: even pairs run exactly-once first, so that a drift over the run (the JIT still
            // improving, the load changing) does not favour one mode
            for (int pair = 1; pair <= settings.aloEoPairs(); pair++) {
                List<String> order = pair % 2 == 1 ? List.of(BenchSettings.AT_LEAST_ONCE, BenchSettings.EXACTLY_ONCE)
                        : List.of(BenchSettings.EXACTLY_ONCE, BenchSettings.AT_LEAST_ONCE);
                for (String mode : order) {
                    if (!settings.scenarios().contains(mode)) {
                        continue;
                    }
                    boolean alo = mode.equals(BenchSettings.AT_LEAST_ONCE);
                    results.add(jobs.run(Report.inPair(alo ? Report.AT_LEAST_ONCE : Report.EXACTLY_ONCE, pair),
                            jobs.newScenario(alo ? "bench-alo" : "bench-eo", alo ? "at-least-once" : "exactly-once"),
                            Optional.empty(), 0));
                }
            }
            if (settings.scenarios().contains(BenchSettings.JDBC_AT_LEAST_ONCE)) {
                results.add(jobs.run(Report.JDBC_AT_LEAST_ONCE, jobs.newScenario("bench-jdbc-alo", "at-least-once"),
                        Optional.empty(), 0, JdbcAtLeastOnceSink::inPlaceOfOurs));
            }
            if (settings.scenarios().contains(BenchSettings.EXACTLY_ONCE_FAST_CHECKPOINTS)) {
                results.add(jobs.run(Report.EXACTLY_ONCE_FAST_CHECKPOINTS, jobs.newScenario("bench-eo-fast", "exactly-once")
                        .with("checkpoint.interval", BenchSettings.FAST_CHECKPOINT_INTERVAL), Optional.empty(), 0));
            }
            if (settings.scenarios().contains(BenchSettings.EFFECT)) {
                // exactly-once with the ledger's effect: one UPDATE of an account per payment (half the events)
                PipelineScenario scenario = jobs.newScenario("bench-effect", "exactly-once")
                        .with("postgres.effect.function", Ledger.FUNCTION);
                openLedger(scenario.database());
                results.add(jobs.run(Report.EXACTLY_ONCE_WITH_EFFECT, scenario, Optional.empty(), 0));
            }
            if (settings.scenarios().contains(BenchSettings.EFFECT_WITH_KEYS)) {
                // the same, each payment's account declared as its key: workers lock accounts in one order
                PipelineScenario scenario = jobs.newScenario("bench-effect-keys", "exactly-once")
                        .with("postgres.effect.function", Ledger.FUNCTION)
                        .with("postgres.effect.keys", Ledger.KEYS);
                openLedger(scenario.database());
                results.add(jobs.run(Report.EXACTLY_ONCE_WITH_EFFECT_AND_KEYS, scenario, Optional.empty(), 0));
            }
            if (settings.scenarios().contains(BenchSettings.ONE_UPDATE_EFFECT)) {
                PipelineScenario scenario = jobs.newScenario("bench-effect-one-update", "exactly-once")
                        .with("postgres.effect.function", ONE_UPDATE_EFFECT)
                        .with("postgres.effect.keys", Ledger.KEYS);
                openLedger(scenario.database());
                scenario.database().execute(ONE_UPDATE_EFFECT_SQL);
                results.add(jobs.run(Report.EXACTLY_ONCE_WITH_ONE_UPDATE_EFFECT, scenario, Optional.empty(), 0));
                oneUpdateLedger = Optional.of(scenario.database());
            }
            if (settings.scenarios().contains(BenchSettings.INBOX)) {
                // its peer: the same input, function and ledger, consumed by hand (no Flink)
                TestPostgres.TestDatabase database = TestPostgres.shared().newDatabase();
                openLedger(database);
                database.execute(ONE_UPDATE_EFFECT_SQL);
                results.add(new InboxConsumerScenario(workload, kafka.bootstrapServers(), database).run(Report.INBOX));
                failures.addAll(InboxCheck.check(database, input.uniqueIds(), kafka.bootstrapServers(), inputTopic,
                        oneUpdateLedger));
            }
            KafkaOnlyScenario kafkaOnly = new KafkaOnlyScenario(workload);
            if (settings.scenarios().contains(BenchSettings.STREAMS)) {
                results.add(kafkaOnly.streams());
            }
            if (settings.scenarios().contains(BenchSettings.COPIER)) {
                results.add(kafkaOnly.copier());
            }
            if (settings.scenarios().contains(BenchSettings.PAYLOADS)) {
                for (int bytes : settings.payloadSizes()) {
                    results.addAll(payloadRun(kafka, cluster, settings.withPayloadBytes(bytes), meter, work));
                }
            }
            if (settings.scenarios().contains(BenchSettings.STATE)) {
                StatePreloader preloader =
                        new StatePreloader(cluster, settings.parallelism(), StatePreloader.COMPACTION_SETTLED);
                for (long preloaded : settings.preloadedIds()) {
                    PipelineScenario scenario = jobs.newScenario("bench-state", "exactly-once");
                    OnceflowConfig config = scenario.config();
                    String savepoint = preloader.preload(preloaded, config.dedupTtl(),
                            settings.jobFlinkConfiguration(config),
                            Files.createTempDirectory(work, "savepoint").toUri().toString());
                    results.add(jobs.run(Report.preloadedName(preloaded), scenario, Optional.of(savepoint), preloaded));
                }
            }
            if (settings.scenarios().contains(BenchSettings.EFFECT_SCALING)) {
                results.addAll(effectScaling(kafka, settings, meter, work));
            }
        } finally {
            cluster.close();
            deleteRecursively(work);
        }

        Report report = new Report(settings, input, meter.measuresPostgres(), results);
        System.out.println();
        System.out.println(report.toText());
        if (settings.json().isPresent()) {
            report.writeJson(settings.json().get());
            say("wrote " + settings.json().get());
        }
        if (!failures.isEmpty()) {
            throw new IllegalStateException("the run's checks failed: " + failures);
        }
    }

    /**
     * The input: {@code records} generated records, without poison (the raw COPY could not take it,
     * and dead letters are not what is measured).
     */
    private static GeneratedInput produceInput(TestKafka kafka, String topic, BenchSettings settings, long records,
            long seed) {
        kafka.createTopics(INPUT_PARTITIONS, topic);
        GeneratorSpec spec = new GeneratorSpec(records, settings.duplicateRatio(), 0.0, settings.payloadBytes(),
                Integer.MAX_VALUE, Integer.MAX_VALUE, seed);
        try (KafkaProducer<byte[], byte[]> producer = kafka.newProducer()) {
            return new EventGenerator(spec).produce(producer, topic);
        }
    }

    /**
     * Runs the job once per delivery guarantee the chosen scenarios use, each over an input of its
     * own, and discards the figures: the first jobs in a JVM pay for class loading and JIT
     * compilation, which flattered whichever scenario ran later. A warm-up of 100k exactly-once
     * records was too short: the at-least-once scenario, run first after it, measured 14,472
     * records/s and 39.9 CPU s, and the same scenario run again after exactly-once 20,280 records/s
     * and 26.3 CPU s (docs/benchmarks.md, "At-least-once against exactly-once").
     */
    private static void warmUp(TestKafka kafka, MiniCluster cluster, BenchSettings settings, ResourceMeter meter,
            Path work) throws Exception {
        String topic = TestKafka.uniqueTopic("bench-warm-up");
        GeneratedInput input = produceInput(kafka, topic, settings, Math.min(settings.events(), WARM_UP_RECORDS),
                INPUT_SEED + 1);
        JobScenario warmUp = new JobScenario(cluster,
                new Workload(settings, topic, input.records(), input.uniqueIds().size(), meter, work));
        for (String guarantee : settings.deliveryGuaranteesOfJobScenarios()) {
            warmUp.run("warm-up, " + guarantee + " (discarded)", warmUp.newScenario("bench-warm-up", guarantee),
                    Optional.empty(), 0);
        }
    }

    /**
     * The raw limit and exactly-once over an input of their own with {@code sized}'s payload size: with
     * large records the bytes, not the per-record work, bound both.
     */
    private static List<ScenarioResult> payloadRun(TestKafka kafka, MiniCluster cluster, BenchSettings sized,
            ResourceMeter meter, Path work) throws Exception {
        String topic = TestKafka.uniqueTopic("bench-in-" + sized.payloadBytes() + "b");
        GeneratedInput input = produceInput(kafka, topic, sized, sized.events(), INPUT_SEED + 2);
        say("produced the input of " + sized.payloadBytes() + " B payloads: " + input);
        List<ScenarioResult> results = new ArrayList<>();
        results.add(rawLimit(Report.withPayload(Report.RAW_LIMIT, sized.payloadBytes()), kafka, topic, input.records(),
                meter));
        JobScenario jobs = new JobScenario(cluster,
                new Workload(sized, topic, input.records(), input.uniqueIds().size(), meter, work));
        results.add(jobs.run(Report.withPayload(Report.EXACTLY_ONCE, sized.payloadBytes()),
                jobs.newScenario("bench-eo-payload", "exactly-once"), Optional.empty(), 0));
        return results;
    }

    private static void openLedger(TestPostgres.TestDatabase database) throws Exception {
        try (Connection ledger = database.connect()) {
            Ledger.install(ledger);
            Ledger.openAccounts(ledger, EventGenerator.ACCOUNTS, LEDGER_OPENING_BALANCE, false);
        }
    }

    /**
     * Exactly-once with {@link #SLEEP_EFFECT} at each of {@link BenchSettings#EFFECT_SCALING_PARALLELISMS},
     * each on a MiniCluster of its own with that many slots, over one input of {@code bench.effect.events}
     * records: effects/s as the database saw them. One effect worker runs per writer subtask.
     */
    private static List<ScenarioResult> effectScaling(TestKafka kafka, BenchSettings settings, ResourceMeter meter,
            Path work) throws Exception {
        String topic = TestKafka.uniqueTopic("bench-in-effects");
        GeneratedInput input = produceInput(kafka, topic, settings, settings.effectScalingEvents(), INPUT_SEED + 3);
        say("produced the input of the effect-scaling scenario: " + input);
        List<ScenarioResult> results = new ArrayList<>();
        // the widest parallelism without the fee account, then each parallelism with it
        List<Object[]> runs = new ArrayList<>();
        runs.add(new Object[] {BenchSettings.EFFECT_SCALING_PARALLELISMS.get(BenchSettings.EFFECT_SCALING_PARALLELISMS.size() - 1),
                false});
        BenchSettings.EFFECT_SCALING_PARALLELISMS.forEach(parallelism -> runs.add(new Object[] {parallelism, true}));
        for (Object[] run : runs) {
            int parallelism = (Integer) run[0];
            boolean fee = (Boolean) run[1];
            BenchSettings at = settings.withParallelism(parallelism);
            MiniCluster cluster = startMiniCluster(parallelism);
            try {
                JobScenario jobs = new JobScenario(cluster,
                        new Workload(at, topic, input.records(), input.uniqueIds().size(), meter, work));
                PipelineScenario scenario = jobs.newScenario("bench-effect-p" + parallelism + (fee ? "-fee" : ""),
                                "exactly-once")
                        .with("postgres.effect.function", fee ? SLEEP_EFFECT_WITH_FEE : SLEEP_EFFECT)
                        .with("postgres.effect.keys", Ledger.KEYS);
                openLedger(scenario.database());
                try (Connection connection = scenario.database().connect();
                        Statement statement = connection.createStatement()) {
                    statement.execute(SLEEP_EFFECT_SQL);
                }
                results.add(jobs.runTimedEffects(Report.timedEffect(parallelism, fee), scenario));
            } finally {
                cluster.close();
            }
        }
        return results;
    }

    private static ScenarioResult rawLimit(String name, TestKafka kafka, String inputTopic, long records,
            ResourceMeter meter) throws Exception {
        say(name + ": copying the input topic and COPYing its rows, at the same time...");
        Measurement measurement = Measurement.start(meter);
        double seconds = new RawLimit(kafka, inputTopic, records).run();
        // the COPY's backend exits after its connection closes; its CPU time counts once it is reaped
        Thread.sleep(BACKEND_EXIT_MILLIS);
        return measurement.throughputOnly(name, records, seconds, measurement.cpuSoFar(),
                ResourceMeter.peakRssBytes());
    }

    private static MiniCluster startMiniCluster(int parallelism) throws Exception {
        Configuration config = new Configuration();
        config.set(TaskManagerOptions.MANAGED_MEMORY_SIZE, MANAGED_MEMORY);
        config.set(WebOptions.CHECKPOINTS_HISTORY_SIZE, CHECKPOINT_HISTORY);
        // any free port: the effect-scaling scenario starts a second MiniCluster while the first runs
        config.set(RestOptions.BIND_PORT, "0");
        // the RocksDB settings users run with: those of flink-conf/config.yaml (bloom filters among them)
        config.addAll(ProjectFlinkConf.rocksDbSettings());
        MiniCluster cluster = new MiniCluster(new MiniClusterConfiguration.Builder()
                .setConfiguration(config)
                .setNumTaskManagers(1)
                .setNumSlotsPerTaskManager(parallelism)
                .build());
        cluster.start();
        return cluster;
    }

    /** The postmaster of the embedded server: the parent of a backend serving us. */
    private static OptionalLong postgresPid() {
        try (Connection connection = TestPostgres.shared().newDatabase().connect();
                Statement statement = connection.createStatement();
                ResultSet backend = statement.executeQuery("SELECT pg_backend_pid()")) {
            backend.next();
            long postmaster = ResourceMeter.parentOf(backend.getLong(1));
            return postmaster > 1 ? OptionalLong.of(postmaster) : OptionalLong.empty();
        } catch (Exception e) {
            return OptionalLong.empty();
        }
    }

    /** Checkpoints and savepoints of a default run take a few hundred MB of the temp directory. */
    static void deleteRecursively(Path directory) throws IOException {
        try (Stream<Path> paths = Files.walk(directory)) {
            for (Path path : paths.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(path);
            }
        }
    }

    static void say(String line) {
        System.out.println("[bench] " + line);
    }
}
