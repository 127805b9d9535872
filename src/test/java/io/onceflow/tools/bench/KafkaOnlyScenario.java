package io.onceflow.tools.bench;

import io.onceflow.testing.PipelineScenario;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * The exactly-once comparisons without PostgreSQL, each run as child JVMs ({@link ChildJvms}) over
 * the shared input topic into an output topic of its own (4 partitions, as the job's):
 *
 * <ul>
 *   <li>{@code streams}: {@link StreamsDedup}, a Kafka Streams exactly-once dedup with the job's TTL,
 *       as many stream threads as the job's parallelism and the job's checkpoint interval as its
 *       commit interval. Done when every unique id is visible.
 *   <li>{@code copier}: Kafka's own {@code TransactionalMessageCopier}, the tool of Kafka's
 *       transaction system tests, one JVM per input partition as those tests run it, each copying
 *       its partition to the same partition of the output topic (key and value; no headers) and
 *       committing its consumer offsets in the same transaction. No dedup: done when every input
 *       record, duplicates included, is visible.
 * </ul>
 *
 * Records/s is the input records over the time from every JVM started (its marker line in the log)
 * until that many records are visible to a {@code read_committed} consumer of the output topic. CPU
 * is this JVM's (the broker, the probe) plus the child JVMs' from their markers on. Once they have
 * ended, the output must hold exactly that many records: more would mean duplicates passed, and the
 * awaited count was reached early.
 */
final class KafkaOnlyScenario {
    /** Kafka's name for a copier's status line once it copies; the first comes after initTransactions. */
    private static final String COPIER_STARTED_MARKER = "\"stage\":\"ProcessLoop\"";
    private static final String COPIER_MAIN_CLASS = "org.apache.kafka.tools.TransactionalMessageCopier";
    /**
     * Records per copier transaction: its consumer's max.poll.records, and so one transaction per
     * poll. A poll returns at most one fetch (max.partition.fetch.bytes, 1 MiB: about 4,000 records of
     * the default 200 B payload), so this is never the limit; the copier's default of 200 would make
     * it commit 20 times as often as needed.
     */
    private static final int COPIER_TRANSACTION_SIZE = 5000;
    /** Kept after the run (the work directory is not): the child JVMs' logs, to see what they did. */
    private static final Path LOG_DIRECTORY = Path.of("target", "bench-logs");
    private static final Duration START_TIMEOUT = Duration.ofMinutes(2);
    /** Well beyond the probe's poll interval, so that it has seen every committed record. */
    private static final long PROBE_SETTLE_MILLIS = 2000;
    private static final Duration STOP_GRACE = Duration.ofSeconds(60);

    private final Workload workload;

    KafkaOnlyScenario(Workload workload) {
        this.workload = workload;
    }

    ScenarioResult streams() throws Exception {
        // a job configuration of the benchmark's kind, for its topics and its dedup TTL
        PipelineScenario scenario = new PipelineScenario("bench-streams");
        List<String> arguments = List.of(
                scenario.kafka().bootstrapServers(),
                workload.inputTopic(),
                scenario.outputTopic,
                scenario.name,
                Files.createTempDirectory(workload.workDirectory(), "streams-state").toString(),
                String.valueOf(workload.settings().checkpointIntervalDuration().toMillis()),
                String.valueOf(workload.settings().parallelism()),
                String.valueOf(scenario.config().dedupTtl().toMillis()));
        return run(Report.KAFKA_STREAMS, scenario, workload.uniqueIds(), StreamsDedup.class.getName(),
                List.of(arguments), StreamsDedup.RUNNING_MARKER, jvms -> jvms.stop(STOP_GRACE));
    }

    ScenarioResult copier() throws Exception {
        PipelineScenario scenario = new PipelineScenario("bench-copier");
        List<List<String>> arguments = new ArrayList<>();
        for (int partition = 0; partition < Benchmark.INPUT_PARTITIONS; partition++) {
            arguments.add(List.of(
                    "--broker-list", scenario.kafka().bootstrapServers(),
                    "--input-topic", workload.inputTopic(),
                    "--input-partition", String.valueOf(partition),
                    "--output-topic", scenario.outputTopic,
                    "--transactional-id", scenario.name + "-" + partition,
                    "--consumer-group", scenario.name,
                    "--transaction-size", String.valueOf(COPIER_TRANSACTION_SIZE),
                    // no --max-messages: up to the partition's end offset at its start, all of the input;
                    // no --enable-random-aborts: every transaction commits
                    "--use-group-metadata"));
        }
        return run(Report.COPIER, scenario, workload.inputRecords(), COPIER_MAIN_CLASS, arguments,
                COPIER_STARTED_MARKER, jvms -> jvms.awaitExit(STOP_GRACE));
    }

    /** How a scenario's JVMs end once their output is visible. */
    @FunctionalInterface
    private interface Ending {
        void end(ChildJvms jvms) throws Exception;
    }

    private ScenarioResult run(String name, PipelineScenario scenario, long expectedRecords, String mainClass,
            List<List<String>> arguments, String startedMarker, Ending ending) throws Exception {
        Benchmark.say(String.format("%s: over %,d records...", name, workload.inputRecords()));
        try (VisibilityProbes probes =
                VisibilityProbes.kafkaOnly(scenario.kafka().bootstrapServers(), scenario.outputTopic)) {
            Measurement measurement = Measurement.start(workload.meter());
            try (ChildJvms jvms = ChildJvms.start(scenario.name, mainClass, arguments,
                    Files.createDirectories(LOG_DIRECTORY))) {
                jvms.awaitStarted(startedMarker, START_TIMEOUT);
                long startNanos = System.nanoTime();
                JobScenario.await(workload.backlogTimeout(), () -> probes.visibleRecords() >= expectedRecords,
                        String.format("%,d records visible in Kafka", expectedRecords), jvms::check);
                double seconds = (System.nanoTime() - startNanos) / 1e9;
                jvms.check();
                ResourceMeter.CpuTime cpu = measurement.cpuSoFar().plusChildren(jvms.cpuSecondsSinceStarted());
                ScenarioResult result = measurement.throughputOnly(name, workload.inputRecords(), seconds, cpu,
                        ResourceMeter.peakRssBytes() + jvms.peakRssBytes());
                ending.end(jvms);
                // everything is committed now: more records than expected would mean that the figure
                // above was reached early (duplicates passed), fewer cannot be (it was awaited)
                Thread.sleep(PROBE_SETTLE_MILLIS);
                if (probes.visibleRecords() != expectedRecords) {
                    throw new IllegalStateException(String.format("%s wrote %,d records, expected %,d", name,
                            probes.visibleRecords(), expectedRecords));
                }
                return result;
            }
        }
    }
}
