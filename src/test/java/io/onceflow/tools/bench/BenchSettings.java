package io.onceflow.tools.bench;

import io.onceflow.job.Onceflow;
import io.onceflow.config.OnceflowConfig;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.util.TimeUtils;

/**
 * What one benchmark run does, from {@code -Dbench.*} system properties (the Maven profile passes
 * them through):
 *
 * <pre>
 * bench.events             input records of the throughput phase (default 300000)
 * bench.payload.bytes      payload size (default 200)
 * bench.duplicate.ratio    share of re-sent records (default 0.10)
 * bench.checkpoint.interval the jobs' checkpoint interval, a job duration such as 1s (default 1s)
 * bench.parallelism        the jobs' parallelism (default 2)
 * bench.scenarios          comma-separated subset of
 *                          raw,alo,jdbc-alo,eo,eo-200ms,effect,effect-keys,effect-one-update,effect-scaling,inbox,
 *                          streams,copier,payloads,state
 *                          (default all; jdbc-alo: alo with flink-connector-jdbc's JdbcSink as the PostgreSQL sink;
 *                          eo-200ms: eo with 200 ms checkpoints; effect:
 *                          eo with the ledger's effect function, one UPDATE per payment; streams: a Kafka Streams
 *                          exactly-once dedup, Kafka only; copier: Kafka's TransactionalMessageCopier, Kafka only;
 *                          payloads: raw and eo again over inputs of each of bench.payload.sizes; effect-keys: effect
 *                          with the payment's account as its key (postgres.effect.keys); effect-scaling:
 *                          eo with an effect that sleeps 2 ms in PostgreSQL per call, at parallelism 1 and 4, over an
 *                          input of bench.effect.events, effects/s from the database; effect-one-update: effect-keys
 *                          with bench.debit, one UPDATE per payment; inbox: a hand-written inbox consumer with the same
 *                          function, no Flink, its peer)
 * bench.effect.events      input records of the effect-scaling scenario (default 30000)
 * bench.payload.sizes      payload sizes of the "payloads" scenario (default 1024,10240)
 * bench.state.ids          ids preloaded into dedup state for the "state" scenario (default 1000000,10000000)
 * bench.latency.rate       records/s of the paced latency phase (default 1000)
 * bench.latency.seconds    length of the latency phase (default 10)
 * bench.pairs              how many times alo and eo run, alternating (default 1): their ratio per pair
 *                          shows the run-to-run spread on a shared machine
 * bench.json               also write the results as JSON to this file (default: none)
 * bench.postgres.durable   PostgreSQL with fsync and synchronous_commit on (default true); false for the
 *                          faster fsync=off server the tests use
 * bench.flink.settings     Flink settings over the job's own, key=value,key=value (default none): the levers
 *                          measured in docs/benchmarks.md, e.g. state.backend.rocksdb.use-bloom-filter=true
 * </pre>
 */
record BenchSettings(
        long events,
        int payloadBytes,
        double duplicateRatio,
        String checkpointInterval,
        int parallelism,
        Set<String> scenarios,
        List<Long> preloadedIds,
        int latencyRate,
        int latencySeconds,
        Optional<Path> json,
        boolean postgresDurable,
        Map<String, String> flinkSettings,
        int aloEoPairs,
        List<Integer> payloadSizes,
        long effectScalingEvents) {

    static final String RAW = "raw";
    static final String AT_LEAST_ONCE = "alo";
    static final String JDBC_AT_LEAST_ONCE = "jdbc-alo";
    static final String EXACTLY_ONCE = "eo";
    /** Exactly-once with {@link #FAST_CHECKPOINT_INTERVAL} checkpoints: the latency target of issue #12. */
    static final String EXACTLY_ONCE_FAST_CHECKPOINTS = "eo-200ms";
    static final String FAST_CHECKPOINT_INTERVAL = "200ms";
    static final String STATE = "state";
    static final String EFFECT = "effect";
    /** {@link #EFFECT} with the payment's account declared as its key ({@code postgres.effect.keys}). */
    static final String EFFECT_WITH_KEYS = "effect-keys";
    /**
     * Exactly-once with the cheapest ledger effect: one UPDATE of the payment's account (the ledger's
     * effect before it kept a journal), its account declared as its key.
     */
    static final String ONE_UPDATE_EFFECT = "effect-one-update";
    /** Exactly-once with a wall-clock-bound effect at {@link #EFFECT_SCALING_PARALLELISMS}. */
    static final String EFFECT_SCALING = "effect-scaling";
    /** The hand-written inbox consumer with {@link #ONE_UPDATE_EFFECT}'s function: its peer (issue #30). */
    static final String INBOX = "inbox";
    static final List<Integer> EFFECT_SCALING_PARALLELISMS = List.of(1, 4);
    static final String STREAMS = "streams";
    static final String COPIER = "copier";
    static final String PAYLOADS = "payloads";
    private static final List<String> ALL_SCENARIOS =
            List.of(RAW, AT_LEAST_ONCE, JDBC_AT_LEAST_ONCE, EXACTLY_ONCE, EXACTLY_ONCE_FAST_CHECKPOINTS, EFFECT,
                    EFFECT_WITH_KEYS, ONE_UPDATE_EFFECT, EFFECT_SCALING, INBOX, STREAMS, COPIER, PAYLOADS, STATE);
    /** The scenarios that run the onceflow job, which a discarded run warms up for. */
    static final Set<String> JOB_SCENARIOS =
            Set.of(AT_LEAST_ONCE, JDBC_AT_LEAST_ONCE, EXACTLY_ONCE, EXACTLY_ONCE_FAST_CHECKPOINTS, EFFECT,
                    EFFECT_WITH_KEYS, ONE_UPDATE_EFFECT, PAYLOADS, STATE);

    /** The job scenarios that run at-least-once; every other job scenario runs exactly-once. */
    private static final Set<String> AT_LEAST_ONCE_SCENARIOS = Set.of(AT_LEAST_ONCE, JDBC_AT_LEAST_ONCE);

    static BenchSettings fromSystemProperties() {
        String json = System.getProperty("bench.json", "");
        return new BenchSettings(
                Long.parseLong(property("bench.events", "300000")),
                Integer.parseInt(property("bench.payload.bytes", "200")),
                Double.parseDouble(property("bench.duplicate.ratio", "0.10")),
                property("bench.checkpoint.interval", "1s"),
                Integer.parseInt(property("bench.parallelism", "2")),
                Arrays.stream(property("bench.scenarios", String.join(",", ALL_SCENARIOS)).split(","))
                        .map(s -> s.trim().toLowerCase(Locale.ROOT))
                        .collect(Collectors.toCollection(LinkedHashSet::new)),
                commaSeparated(property("bench.state.ids", "1000000,10000000")).map(Long::parseLong).toList(),
                Integer.parseInt(property("bench.latency.rate", "1000")),
                Integer.parseInt(property("bench.latency.seconds", "10")),
                json.isBlank() ? Optional.empty() : Optional.of(Path.of(json)),
                Boolean.parseBoolean(property("bench.postgres.durable", "true")),
                keyValues(property("bench.flink.settings", "")),
                Integer.parseInt(property("bench.pairs", "1")),
                commaSeparated(property("bench.payload.sizes", "1024,10240")).map(Integer::parseInt).toList(),
                Long.parseLong(property("bench.effect.events", "30000")));
    }

    private static Stream<String> commaSeparated(String list) {
        return Arrays.stream(list.split(",")).map(String::trim).filter(s -> !s.isEmpty());
    }

    private static Map<String, String> keyValues(String list) {
        Map<String, String> settings = new LinkedHashMap<>();
        for (String entry : list.split(",")) {
            if (entry.isBlank()) {
                continue;
            }
            int equals = entry.indexOf('=');
            if (equals <= 0) {
                throw new IllegalArgumentException("bench.flink.settings takes key=value pairs separated by commas, got '"
                        + entry + "'");
            }
            settings.put(entry.substring(0, equals).trim(), entry.substring(equals + 1).trim());
        }
        return settings;
    }

    BenchSettings {
        if (!ALL_SCENARIOS.containsAll(scenarios)) {
            throw new IllegalArgumentException("bench.scenarios must be a subset of " + String.join(",", ALL_SCENARIOS)
                    + ", got " + scenarios);
        }
        if (events <= 0 || payloadBytes < 0 || parallelism <= 0 || latencyRate <= 0 || latencySeconds < 0
                || aloEoPairs <= 0 || payloadSizes.stream().anyMatch(size -> size <= 0) || effectScalingEvents <= 0) {
            throw new IllegalArgumentException("bench.events, bench.parallelism, bench.latency.rate, bench.pairs and"
                    + " bench.payload.sizes, bench.effect.events must be positive");
        }
    }

    /** Maven passes an unset {@code ${bench.x}} through as an empty string: treat it as unset. */
    private static String property(String name, String fallback) {
        String value = System.getProperty(name);
        return value == null || value.isBlank() ? fallback : value.trim();
    }

    /**
     * The {@code delivery.guarantee} values of the chosen job scenarios, at-least-once first: a
     * warm-up runs each, so that neither mode's code is compiled at the other's expense.
     */
    List<String> deliveryGuaranteesOfJobScenarios() {
        List<String> guarantees = new ArrayList<>();
        if (scenarios.stream().anyMatch(AT_LEAST_ONCE_SCENARIOS::contains)) {
            guarantees.add("at-least-once");
        }
        if (scenarios.stream().anyMatch(s -> JOB_SCENARIOS.contains(s) && !AT_LEAST_ONCE_SCENARIOS.contains(s))) {
            guarantees.add("exactly-once");
        }
        return guarantees;
    }

    /** These settings with another payload size: the "payloads" scenario's inputs. */
    BenchSettings withPayloadBytes(int bytes) {
        return new BenchSettings(events, bytes, duplicateRatio, checkpointInterval, parallelism, scenarios,
                preloadedIds, latencyRate, latencySeconds, json, postgresDurable, flinkSettings, aloEoPairs,
                payloadSizes, effectScalingEvents);
    }

    /** These settings at another parallelism: the "effect-scaling" scenario's runs. */
    BenchSettings withParallelism(int jobParallelism) {
        return new BenchSettings(events, payloadBytes, duplicateRatio, checkpointInterval, jobParallelism, scenarios,
                preloadedIds, latencyRate, latencySeconds, json, postgresDurable, flinkSettings, aloEoPairs,
                payloadSizes, effectScalingEvents);
    }

    /** The checkpoint interval as the job will read it (Flink's duration syntax: 1s, 500ms, 1min). */
    Duration checkpointIntervalDuration() {
        return TimeUtils.parseDuration(checkpointInterval);
    }

    /** The job's Flink settings with {@code bench.flink.settings} over them. */
    Configuration jobFlinkConfiguration(OnceflowConfig config) {
        Configuration flink = Onceflow.flinkConfiguration(config);
        flink.addAll(Configuration.fromMap(flinkSettings));
        return flink;
    }

    Duration latencyPhase() {
        return Duration.ofSeconds(latencySeconds);
    }

    @Override
    public String toString() {
        return String.format(Locale.ROOT, "events=%,d payload=%dB duplicates=%.0f%% checkpoint=%s parallelism=%d"
                        + " scenarios=%s alo/eo pairs=%d preloaded ids=%s payload sizes=%s effect-scaling events=%,d"
                        + " latency=%d/s for %ds postgres=%s flink settings=%s",
                events, payloadBytes, duplicateRatio * 100, checkpointInterval, parallelism, scenarios, aloEoPairs,
                preloadedIds, payloadSizes, effectScalingEvents, latencyRate, latencySeconds,
                postgresDurable ? "durable (fsync, synchronous_commit on)" : "fsync off, synchronous_commit off",
                flinkSettings.isEmpty() ? "the job's" : flinkSettings);
    }
}
