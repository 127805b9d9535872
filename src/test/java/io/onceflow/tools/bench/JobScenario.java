package io.onceflow.tools.bench;

import static java.nio.charset.StandardCharsets.UTF_8;

import io.onceflow.api.EventProcessor;
import io.onceflow.job.Onceflow;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.config.PostgresSettings;
import io.onceflow.job.JobDefinition;
import io.onceflow.job.OnceflowPipeline;
import io.onceflow.testing.Eventually;
import io.onceflow.testing.PipelineScenario;
import java.nio.file.Files;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.StateRecoveryOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.RecoveryClaimMode;
import org.apache.flink.runtime.checkpoint.AbstractCheckpointStats;
import org.apache.flink.runtime.checkpoint.CheckpointStatsStatus;
import org.apache.flink.runtime.checkpoint.CompletedCheckpointStats;
import org.apache.flink.runtime.execution.ExecutionState;
import org.apache.flink.runtime.executiongraph.AccessExecutionGraph;
import org.apache.flink.runtime.executiongraph.AccessExecutionJobVertex;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.util.TestStreamEnvironment;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.internals.RecordHeader;

/**
 * One run of the onceflow job (the production wiring of {@link Onceflow#job}, RocksDB,
 * both sinks) on the shared MiniCluster, in two phases:
 *
 * <ol>
 *   <li>throughput: the job starts on the shared input topic, already full. Records/s is the input
 *       records over the time from all tasks RUNNING (after state restore and sink start-up) to
 *       every unique id visible in Kafka (read_committed) and committed in PostgreSQL. The
 *       exactly-once tail, the last records waiting for a checkpoint, is in: keep the run much
 *       longer than a checkpoint interval;
 *   <li>latency: with the backlog done, records are produced at a steady rate below capacity to the
 *       job's second input topic and timed from their producer timestamp until visible.
 * </ol>
 *
 * Then it waits for one more checkpoint, reads the checkpoint history of the job and cancels it.
 */
final class JobScenario {
    /** Name of the dedup operator in {@code OnceflowPipeline}; its task's checkpointed state is the dedup state. */
    private static final String DEDUP_TASK_NAME = "Dedup by message id";
    /** One id in this many of the latency phase is also timed in PostgreSQL. */
    private static final int POSTGRES_SAMPLE_EVERY = 10;

    private final MiniCluster cluster;
    private final Workload workload;
    private final BenchSettings settings;

    JobScenario(MiniCluster cluster, Workload workload) {
        this.cluster = cluster;
        this.workload = workload;
        this.settings = workload.settings();
    }

    /** The job's configuration for one scenario: its own output topic, database and checkpoints. */
    PipelineScenario newScenario(String purpose, String deliveryGuarantee) throws Exception {
        PipelineScenario scenario = new PipelineScenario(purpose).withPostgres();
        return scenario
                .with("input.topics", workload.inputTopic() + "," + scenario.inputTopic)
                .with("input.starting.offsets", "earliest")
                .with("delivery.guarantee", deliveryGuarantee)
                .with("state.backend", "rocksdb")
                .with("checkpoint.interval", settings.checkpointInterval())
                .with("checkpoint.dir",
                        Files.createTempDirectory(workload.workDirectory(), purpose).toUri().toString())
                .with("parallelism", String.valueOf(settings.parallelism()))
                .with("message.max.bytes", String.valueOf(Math.max(4096, 2 * settings.payloadBytes() + 1024)));
    }

    /** Runs the job with the sinks its configuration names. */
    ScenarioResult run(String name, PipelineScenario scenario, Optional<String> restoreFrom, long preloadedIds)
            throws Exception {
        return run(name, scenario, restoreFrom, preloadedIds, (configured, config) -> configured);
    }

    /** Which sinks the job gets, given the ones its configuration names (started by {@link JobDefinition#defineIn}). */
    @FunctionalInterface
    interface SinkChoice {
        OnceflowPipeline.Sinks choose(OnceflowPipeline.Sinks configured, OnceflowConfig config);
    }

    /**
     * @param restoreFrom a savepoint holding preloaded dedup state, claimed by the job
     * @param preloadedIds how many ids that savepoint tracks
     * @param sinks the sinks to put into the pipeline, e.g. another PostgreSQL sink in place of ours
     */
    ScenarioResult run(String name, PipelineScenario scenario, Optional<String> restoreFrom, long preloadedIds,
            SinkChoice sinks) throws Exception {
        OnceflowConfig config = scenario.config();
        PostgresSettings postgres = config.postgres().orElseThrow();
        Configuration flink = settings.jobFlinkConfiguration(config);
        restoreFrom.ifPresent(savepoint -> {
            flink.set(StateRecoveryOptions.SAVEPOINT_PATH, savepoint);
            flink.set(StateRecoveryOptions.SAVEPOINT_IGNORE_UNCLAIMED_STATE, true);
            // claimed: the first checkpoint stays incremental instead of copying the whole preloaded state
            flink.set(StateRecoveryOptions.RESTORE_MODE, RecoveryClaimMode.CLAIM);
        });
        StreamExecutionEnvironment env =
                new TestStreamEnvironment(cluster, flink, settings.parallelism(), List.of(), List.of());
        Onceflow.job(config, EventProcessor.passThrough())
                .withSinks(started -> sinks.choose(started, config))
                .defineIn(env);

        Benchmark.say(String.format("%s: running the job over %,d records...", name, workload.inputRecords()));
        try (VisibilityProbes probes = VisibilityProbes.withPostgres(
                scenario.kafka().bootstrapServers(), scenario.outputTopic, scenario.database(), postgres.table())) {
            Measurement measurement = Measurement.start(workload.meter());
            JobClient job = env.executeAsync("bench " + name);
            await(Duration.ofMinutes(5), () -> allTasksRunning(cluster, job), "all tasks running", job);
            long startNanos = System.nanoTime();
            Duration backlogTimeout = workload.backlogTimeout();
            long uniqueIds = workload.uniqueIds();
            await(backlogTimeout, () -> probes.visibleRecords() >= uniqueIds, "all ids visible in Kafka", job);
            await(backlogTimeout, () -> probes.postgresRows() >= uniqueIds, "all ids committed in PostgreSQL", job);
            boolean effect = postgres.effectFunction().isPresent();
            if (effect) {
                // the effects are applied after their rows, off the task thread: the scenario is done
                // when the last one is, and its throughput counts to there
                Benchmark.say(String.format("%s: every row committed after %.1f s (%,.0f records/s); waiting for"
                        + " the effects...", name, (System.nanoTime() - startNanos) / 1e9,
                        workload.inputRecords() / ((System.nanoTime() - startNanos) / 1e9)));
                await(backlogTimeout, () -> !probes.effectsQueued(), "every effect applied", job);
            }
            double seconds = (System.nanoTime() - startNanos) / 1e9;
            ResourceMeter.CpuTime cpu = measurement.cpuSoFar();
            long peakRss = ResourceMeter.peakRssBytes();
            double recordsPerSecond = workload.inputRecords() / seconds;
            measurement.sayThroughput(name, recordsPerSecond, cpu);

            long pacedIds = producePaced(scenario, probes, effect);
            long latencyDone = System.currentTimeMillis();
            Duration latencyTimeout = config.checkpointInterval().multipliedBy(3).plusSeconds(30);
            await(latencyTimeout, () -> probes.sendTimes.isEmpty() && probes.postgresSample.isEmpty()
                    && probes.effectSample.isEmpty(), "the latency phase's ids visible (and their effects applied)", job);
            CompletedCheckpointStats last = awaitCheckpointAfter(job, latencyDone);
            AccessExecutionGraph graph = cluster.getExecutionGraph(job.getJobID()).get();
            job.cancel().get(60, TimeUnit.SECONDS);
            ScenarioResult.Updates updates = effect ? eventsTableUpdates(scenario, postgres.table())
                    : ScenarioResult.Updates.NONE;

            return new ScenarioResult(
                    name,
                    workload.inputRecords(),
                    recordsPerSecond,
                    cpu.totalSeconds() / workload.inputRecords() * 1e6,
                    cpu.postgresSeconds() / cpu.totalSeconds(),
                    peakRss,
                    Percentiles.of(probes.kafkaLatencies()),
                    Percentiles.of(probes.postgresLatencies()),
                    Percentiles.of(probes.effectLatencies()),
                    Percentiles.of(completedCheckpoints(graph).stream()
                            .mapToLong(AbstractCheckpointStats::getEndToEndDuration).toArray()),
                    preloadedIds + uniqueIds + pacedIds,
                    last.getTaskStateStats(dedupTask(graph).getJobVertexId()).getStateSize(),
                    measurement.loadAverage(),
                    updates);
        }
    }

    /**
     * The job with an effect function that stores {@code clock_timestamp()} in its result as {@code
     * at} ({@link Benchmark#SLEEP_EFFECT_SQL}), over the input: the throughput phase only (a latency
     * phase would add effects to the measured ones). The result's records/s is <b>effects/s as the
     * database saw them</b>: effects applied over the time from the first to the last one's {@code at};
     * its CPU is the scenario's; its checkpoints those of the whole run.
     */
    ScenarioResult runTimedEffects(String name, PipelineScenario scenario) throws Exception {
        OnceflowConfig config = scenario.config();
        PostgresSettings postgres = config.postgres().orElseThrow();
        StreamExecutionEnvironment env = new TestStreamEnvironment(cluster, settings.jobFlinkConfiguration(config),
                settings.parallelism(), List.of(), List.of());
        Onceflow.job(config, EventProcessor.passThrough()).defineIn(env);
        Benchmark.say(String.format("%s: running the job over %,d records...", name, workload.inputRecords()));
        try (VisibilityProbes probes = VisibilityProbes.withPostgres(
                scenario.kafka().bootstrapServers(), scenario.outputTopic, scenario.database(), postgres.table())) {
            Measurement measurement = Measurement.start(workload.meter());
            JobClient job = env.executeAsync("bench " + name);
            await(Duration.ofMinutes(5), () -> allTasksRunning(cluster, job), "all tasks running", job);
            long startNanos = System.nanoTime();
            long uniqueIds = workload.uniqueIds();
            await(workload.backlogTimeout(), () -> probes.postgresRows() >= uniqueIds, "all ids committed in PostgreSQL",
                    job);
            double rowsSeconds = (System.nanoTime() - startNanos) / 1e9;
            await(workload.backlogTimeout(), () -> !probes.effectsQueued(), "every effect applied", job);
            double seconds = (System.nanoTime() - startNanos) / 1e9;
            ResourceMeter.CpuTime cpu = measurement.cpuSoFar();
            long peakRss = ResourceMeter.peakRssBytes();
            AccessExecutionGraph graph = cluster.getExecutionGraph(job.getJobID()).get();
            job.cancel().get(60, TimeUnit.SECONDS);
            double[] applied = appliedSpan(scenario, postgres.table());
            double effectsPerSecond = (applied[0] - 1) / applied[1];
            Benchmark.say(String.format(Locale.ROOT, "%s: rows committed after %.1f s, every effect applied after %.1f s;"
                    + " %,.0f effects applied from %.1f s of first to last: %,.0f effects/s", name, rowsSeconds,
                    seconds, applied[0], applied[1], effectsPerSecond));
            measurement.sayThroughput(name, effectsPerSecond, cpu);
            return new ScenarioResult(name, workload.inputRecords(), effectsPerSecond,
                    cpu.totalSeconds() / workload.inputRecords() * 1e6, cpu.postgresSeconds() / cpu.totalSeconds(),
                    peakRss, Percentiles.NONE, Percentiles.NONE, Percentiles.NONE,
                    Percentiles.of(completedCheckpoints(graph).stream()
                            .mapToLong(AbstractCheckpointStats::getEndToEndDuration).toArray()),
                    0, -1, measurement.loadAverage(), eventsTableUpdates(scenario, postgres.table()));
        }
    }

    /** Effects applied (rows whose result has an {@code at}), and the seconds from the first to the last. */
    private static double[] appliedSpan(PipelineScenario scenario, String table) throws SQLException {
        try (Connection connection = scenario.database().connect();
                Statement statement = connection.createStatement();
                ResultSet span = statement.executeQuery("SELECT count(*), extract(epoch FROM"
                        + " max((result->>'at')::timestamptz) - min((result->>'at')::timestamptz)) FROM " + table
                        + " WHERE result ? 'at'")) {
            span.next();
            return new double[] {span.getLong(1), span.getDouble(2)};
        }
    }

    /**
     * The events table's updates and HOT updates, once the job's sessions are gone: a backend's
     * statistics reach {@code pg_stat_user_tables} when it flushes them (at the latest as it exits).
     */
    private static ScenarioResult.Updates eventsTableUpdates(PipelineScenario scenario, String table) throws Exception {
        String relation = table.substring(table.indexOf('.') + 1);
        try (Connection connection = scenario.database().connect(); Statement statement = connection.createStatement()) {
            long[] last = {-1, -1};
            // until two reads a second apart agree: the job's backends exit after the cancel, each flushing
            for (int attempt = 0; attempt < 10; attempt++) {
                Thread.sleep(1000);
                try (ResultSet stats = statement.executeQuery("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables"
                        + " WHERE relname = '" + relation + "'")) {
                    stats.next();
                    long updates = stats.getLong(1);
                    long hot = stats.getLong(2);
                    if (updates == last[0] && hot == last[1]) {
                        break;
                    }
                    last[0] = updates;
                    last[1] = hot;
                }
            }
            return new ScenarioResult.Updates(last[0], last[1]);
        }
    }

    /**
     * Produces {@code latency.rate} records per second for {@code latency.seconds}, each a new UUID
     * id, stamped with the time of sending. Returns how many.
     */
    private long producePaced(PipelineScenario scenario, VisibilityProbes probes, boolean effect)
            throws InterruptedException {
        long count = (long) settings.latencyRate() * settings.latencySeconds();
        Benchmark.say(String.format("latency phase: %,d records at %,d/s", count, settings.latencyRate()));
        long start = System.nanoTime();
        try (KafkaProducer<byte[], byte[]> producer = scenario.kafka().newProducer()) {
            for (long i = 0; i < count; i++) {
                long due = start + i * 1_000_000_000L / settings.latencyRate();
                long wait = due - System.nanoTime();
                if (wait > 0) {
                    TimeUnit.NANOSECONDS.sleep(wait);
                }
                String id = UUID.randomUUID().toString();
                byte[] idBytes = id.getBytes(UTF_8);
                long sent = System.currentTimeMillis();
                probes.sendTimes.put(id, sent);
                if (i % POSTGRES_SAMPLE_EVERY == 0) {
                    probes.postgresSample.put(id, sent);
                    if (effect) {
                        probes.effectSample.put(id, sent);
                    }
                }
                producer.send(new ProducerRecord<>(scenario.inputTopic, null, sent, idBytes, payload(id),
                        List.of(new RecordHeader("message-id", idBytes))));
            }
        }
        return count;
    }

    private byte[] payload(String id) {
        String json = "{\"id\":\"" + id + "\",\"type\":\"latency-probe\"";
        int padding = settings.payloadBytes() - json.length() - 12;
        return (padding > 0 ? json + ",\"note\":\"" + "x".repeat(padding) + "\"}" : json + "}").getBytes(UTF_8);
    }

    private CompletedCheckpointStats awaitCheckpointAfter(JobClient job, long epochMillis) throws Exception {
        CompletedCheckpointStats[] found = new CompletedCheckpointStats[1];
        await(settings.latencyPhase().plusMinutes(2), () -> {
            List<CompletedCheckpointStats> completed =
                    completedCheckpoints(cluster.getExecutionGraph(job.getJobID()).get());
            found[0] = completed.stream()
                    .filter(c -> c.getTriggerTimestamp() > epochMillis)
                    .reduce((first, second) -> second).orElse(null);
            return found[0] != null;
        }, "a checkpoint after the latency phase", job);
        return found[0];
    }

    private static List<CompletedCheckpointStats> completedCheckpoints(AccessExecutionGraph graph) {
        return graph.getCheckpointStatsSnapshot().getHistory().getCheckpoints().stream()
                .filter(c -> c.getStatus() == CheckpointStatsStatus.COMPLETED)
                .map(CompletedCheckpointStats.class::cast)
                .sorted((a, b) -> Long.compare(a.getCheckpointId(), b.getCheckpointId()))
                .toList();
    }

    /** Whether every task of {@code job} on {@code cluster} runs (restoring state comes before that). */
    static boolean allTasksRunning(MiniCluster cluster, JobClient job) throws Exception {
        // an initializing job's graph has no vertices yet, which "every vertex runs" would accept
        boolean anyVertex = false;
        for (AccessExecutionJobVertex vertex : cluster.getExecutionGraph(job.getJobID()).get().getVerticesTopologically()) {
            anyVertex = true;
            if (vertex.getAggregateState() != ExecutionState.RUNNING) {
                return false;
            }
        }
        return anyVertex;
    }

    private static AccessExecutionJobVertex dedupTask(AccessExecutionGraph graph) {
        for (AccessExecutionJobVertex vertex : graph.getVerticesTopologically()) {
            if (vertex.getName().contains(DEDUP_TASK_NAME)) {
                return vertex;
            }
        }
        throw new IllegalStateException("no task named " + DEDUP_TASK_NAME + " in the job graph");
    }

    /** Polls {@code condition} until it holds; fails fast if the job stopped, or after {@code timeout}. */
    static void await(Duration timeout, Eventually.Condition<Exception> condition, String what, JobClient job)
            throws Exception {
        await(timeout, condition, what, () -> {
            if (job.getJobStatus().get().isGloballyTerminalState()) {
                job.getJobExecutionResult().get(); // throws the job's failure
                throw new IllegalStateException("the job ended before " + what);
            }
        });
    }

    /** Whatever produces the awaited output: throws when it has failed, so that waiting stops. */
    @FunctionalInterface
    interface Liveness {
        void check() throws Exception;
    }

    /** Polls {@code condition} until it holds; fails fast when {@code liveness} throws, or after {@code timeout}. */
    static void await(Duration timeout, Eventually.Condition<Exception> condition, String what, Liveness liveness)
            throws Exception {
        boolean held = Eventually.holdsWithin(timeout, Duration.ofMillis(50), () -> {
            if (condition.holds()) {
                return true;
            }
            liveness.check();
            return false;
        });
        if (!held) {
            throw new TimeoutException("no " + what + " within " + timeout);
        }
    }
}
