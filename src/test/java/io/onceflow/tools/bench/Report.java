package io.onceflow.tools.bench;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import io.onceflow.tools.generator.GeneratedInput;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import org.apache.flink.util.TimeUtils;

/** The benchmark's table, ratios and target checks, as text and as JSON. */
final class Report {
    static final String RAW_LIMIT = "raw limit";
    static final String AT_LEAST_ONCE = "at-least-once";
    static final String JDBC_AT_LEAST_ONCE = "at-least-once, JdbcSink";
    static final String EXACTLY_ONCE = "exactly-once";
    static final String EXACTLY_ONCE_FAST_CHECKPOINTS = "exactly-once, " + BenchSettings.FAST_CHECKPOINT_INTERVAL
            + " checkpoints";
    static final String EXACTLY_ONCE_WITH_EFFECT = "exactly-once + effect";
    static final String EXACTLY_ONCE_WITH_EFFECT_AND_KEYS = "exactly-once + effect, keys";
    static final String EXACTLY_ONCE_WITH_ONE_UPDATE_EFFECT = "exactly-once + one-UPDATE effect, keys";
    /** No Flink: {@link InboxConsumerScenario}, the peer of {@link #EXACTLY_ONCE_WITH_ONE_UPDATE_EFFECT}. */
    static final String INBOX = "hand-written inbox + one-UPDATE effect";
    /** Issue #23: exactly-once + the ledger's effect >= 0.7 x plain exactly-once, checkpoint p99 <= 1.5 x. */
    static final double TARGET_EFFECT_VS_EO = 0.7;
    static final double TARGET_EFFECT_CHECKPOINT_P99_VS_EO = 1.5;
    /** Issue #23: a wall-clock-bound effect applies >= 3 x the effects/s at parallelism 4 as at 1. */
    static final double TARGET_EFFECT_SCALING = 3.0;
    /** Issue #30: the 2 ms effect with 5% of payments paying the one fee account / without it, at parallelism 4. */
    static final double TARGET_HOT_ACCOUNT = 0.8;
    /** Kafka-only rows end in a footnote mark: {@link #KAFKA_ONLY_NOTE}. */
    static final String KAFKA_STREAMS = "Kafka Streams exactly-once *";
    static final String COPIER = "Kafka transactional copier *";
    private static final String KAFKA_ONLY_NOTE = "* Kafka only: no PostgreSQL sink, input topic to output topic."
            + " Kafka Streams: dedup by the message-id header, the job's TTL, %d stream threads, commit interval = the"
            + " checkpoint interval. Copier: Kafka's TransactionalMessageCopier, one JVM per input partition, no"
            + " dedup (every record is copied, duplicates too), its own producer settings. Both as child JVMs: CPU"
            + " from their start on (JVM start-up left out), RSS = this JVM's peak + theirs.";
    static final double TARGET_EO_VS_ALO = 0.95;
    /** Issue #12: >= 0.6 x against a raw limit with the same durable settings; round 1's 0.5 was with fsync off. */
    static final double TARGET_EO_VS_DURABLE_RAW = 0.6;
    static final double TARGET_EO_VS_RAW_FSYNC_OFF = 0.5;
    static final double TARGET_EO_VS_KAFKA_STREAMS = 1.5;
    static final double TARGET_EO_VS_COPIER = 2.0;
    /** The JdbcSink would do for at-least-once if it came within 10% of our writer. */
    static final double JDBC_SINK_GOOD_ENOUGH = 0.90;
    static final double TARGET_STATE_BYTES_PER_ID = 40;
    /** Issue #12: with 200 ms checkpoints, p99 visibility <= interval + 300 ms at >= 0.8 x the 1 s throughput. */
    static final long FAST_CHECKPOINT_SLACK_MILLIS = 300;
    static final double TARGET_FAST_CHECKPOINTS_VS_EO = 0.8;

    private final BenchSettings settings;
    private final GeneratedInput input;
    private final boolean postgresCpuMeasured;
    private final List<ScenarioResult> results;

    Report(BenchSettings settings, GeneratedInput input, boolean postgresCpuMeasured, List<ScenarioResult> results) {
        this.settings = settings;
        this.input = input;
        this.postgresCpuMeasured = postgresCpuMeasured;
        this.results = results;
    }

    /** The name of scenario {@code name} in alo/eo pair {@code pair}: the first pair keeps the plain name. */
    static String inPair(String name, int pair) {
        return pair == 1 ? name : name + " (pair " + pair + ")";
    }

    /** ALO / EO throughput of each pair that ran both, in order. */
    private List<Double> aloOverEoPerPair() {
        List<Double> ratios = new ArrayList<>();
        for (int pair = 1; pair <= settings.aloEoPairs(); pair++) {
            throughputRatio(inPair(AT_LEAST_ONCE, pair), inPair(EXACTLY_ONCE, pair)).ifPresent(ratios::add);
        }
        return ratios;
    }

    private static double median(List<Double> values) {
        List<Double> sorted = values.stream().sorted().toList();
        int middle = sorted.size() / 2;
        return sorted.size() % 2 == 1 ? sorted.get(middle) : (sorted.get(middle - 1) + sorted.get(middle)) / 2;
    }

    /** The name of scenario {@code name} run over an input of {@code bytes} payloads: "exactly-once, 1 KB payloads". */
    static String withPayload(String name, int bytes) {
        return name + ", " + (bytes % 1024 == 0 ? bytes / 1024 + " KB" : bytes + " B") + " payloads";
    }

    /** Payload bytes per second, in MB: what the payload rows report besides records/s. */
    private static double megabytesPerSecond(ScenarioResult result, int payloadBytes) {
        return result.recordsPerSecond() * payloadBytes / 1e6;
    }

    /** The effect-scaling row at {@code parallelism}: its records/s column holds effects/s. */
    /** @param fee whether 1 payment in 20 also pays a fee to the one fee account */
    static String timedEffect(int parallelism, boolean fee) {
        return "exactly-once + 2 ms effect updating its account" + (fee ? ", 5% with a fee" : "") + ", parallelism "
                + parallelism + " (effects/s) \u2020";
    }

    static String preloadedName(long ids) {
        return EXACTLY_ONCE + ", " + compact(ids) + " ids preloaded";
    }

    private static String compact(long n) {
        return n % 1_000_000 == 0 ? n / 1_000_000 + "M" : n % 1000 == 0 ? n / 1000 + "k" : Long.toString(n);
    }

    private Optional<ScenarioResult> result(String name) {
        return results.stream().filter(r -> r.name().equals(name)).findFirst();
    }

    private Optional<Double> throughputRatio(String numerator, String denominator) {
        return result(numerator).flatMap(n -> result(denominator).map(d -> n.recordsPerSecond() / d.recordsPerSecond()));
    }

    /** How many times the CPU per record of {@code numerator} that of {@code denominator} is. */
    private Optional<Double> cpuRatio(String numerator, String denominator) {
        return result(numerator).flatMap(n -> result(denominator)
                .map(d -> n.cpuSecondsPerMillion() / d.cpuSecondsPerMillion()));
    }

    /**
     * EO against a Kafka-only system: throughput EO / other, and CPU per record other / EO, so that
     * for both above 1 is EO's advantage.
     */
    private void compareWithKafkaOnly(StringBuilder text, String other, String label, double target) {
        throughputRatio(EXACTLY_ONCE, other).ifPresent(ratio -> text.append(String.format(Locale.ROOT,
                "EO (with PostgreSQL) / %s throughput: %.2f (target >= %.2f: %s)%n", label, ratio, target,
                verdict(ratio >= target))));
        cpuRatio(other, EXACTLY_ONCE).ifPresent(ratio -> text.append(String.format(Locale.ROOT,
                "%s / EO (with PostgreSQL) CPU per record: %.2f (target >= %.2f: %s)%n", label, ratio, target,
                verdict(ratio >= target))));
    }

    String toText() {
        StringBuilder text = new StringBuilder();
        text.append("Input: ").append(input).append("; ").append(settings).append('\n');
        text.append("CPU = this JVM (broker, MiniCluster, benchmark clients)")
                .append(postgresCpuMeasured ? " + the PostgreSQL server processes" : " only (PostgreSQL not visible)")
                .append(" (+ the child JVMs of the Kafka-only rows)")
                .append("; RSS = this JVM's peak during the scenario. Latencies and checkpoints in ms. Load average:")
                .append(" the machine's one-minute figure (")
                .append(Runtime.getRuntime().availableProcessors()).append(" cores) as the scenario started and ended.\n\n");
        text.append("| scenario | records/s | CPU s / M records | of which PostgreSQL | peak RSS MB"
                + " | Kafka visible p50 / p99 | PostgreSQL committed p50 / p99 | effect applied p50 / p99"
                + " | checkpoint p50 / p99 | ids tracked | dedup state B / id | load average start -> end |\n");
        text.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (ScenarioResult r : results) {
            text.append(String.format(Locale.ROOT, "| %s | %,.0f | %.1f | %.0f%% | %,d | %s | %s | %s | %s | %s | %s | %s |%n",
                    r.name(), r.recordsPerSecond(), r.cpuSecondsPerMillion(), 100 * r.postgresCpuShare(),
                    r.peakRssBytes() / (1024 * 1024), pair(r.kafkaVisibility()), pair(r.postgresVisibility()),
                    pair(r.effectApplied()), pair(r.checkpointDuration()), r.trackedIds() > 0 ? String.format(Locale.ROOT, "%,d", r.trackedIds()) : "-",
                    r.stateBytesPerTrackedId() >= 0 ? String.format(Locale.ROOT, "%.1f", r.stateBytesPerTrackedId()) : "-",
                    r.loadAverage()));
        }
        if (results.stream().anyMatch(r -> r.name().endsWith("\u2020"))) {
            text.append('\n').append("\u2020 Records/s column: effects/s, effects applied over the time from the first"
                    + " effect's clock_timestamp() to the last one's (from the database); each call sleeps 2 ms in"
                    + " PostgreSQL (pg_sleep), no keys; one effect worker per writer subtask. Over an input of ")
                    .append(String.format(Locale.ROOT, "%,d", settings.effectScalingEvents()))
                    .append(" records, no latency phase.\n");
        }
        if (result(KAFKA_STREAMS).isPresent() || result(COPIER).isPresent()) {
            text.append('\n').append(String.format(Locale.ROOT, KAFKA_ONLY_NOTE, settings.parallelism())).append('\n');
        }
        text.append('\n');
        throughputRatio(EXACTLY_ONCE, AT_LEAST_ONCE).ifPresent(ratio -> text.append(String.format(Locale.ROOT,
                "EO / ALO throughput: %.2f (target >= %.2f: %s)%n", ratio, TARGET_EO_VS_ALO, verdict(ratio >= TARGET_EO_VS_ALO))));
        List<Double> aloOverEoPerPair = aloOverEoPerPair();
        if (aloOverEoPerPair.size() > 1) {
            text.append(String.format(Locale.ROOT, "ALO / EO throughput per pair: %s (median %.2f; target >= 1)%n",
                    aloOverEoPerPair.stream().map(r -> String.format(Locale.ROOT, "%.2f", r)).toList(),
                    median(aloOverEoPerPair)));
        }
        for (String name : List.of(EXACTLY_ONCE_WITH_EFFECT, EXACTLY_ONCE_WITH_EFFECT_AND_KEYS,
                EXACTLY_ONCE_WITH_ONE_UPDATE_EFFECT)) {
            result(name).ifPresent(effect -> result(EXACTLY_ONCE).ifPresent(eo -> {
                double ratio = effect.recordsPerSecond() / eo.recordsPerSecond();
                double checkpoints = effect.checkpointDuration().p99() / (double) eo.checkpointDuration().p99();
                text.append(String.format(Locale.ROOT, "%s / EO throughput (to the last effect applied): %.2f"
                                + " (target >= %.2f: %s); checkpoint p99 with / without the effect: %,d / %,d ms = %.2f"
                                + " (target <= %.2f: %s)%n", name, ratio, TARGET_EFFECT_VS_EO,
                        verdict(ratio >= TARGET_EFFECT_VS_EO), effect.checkpointDuration().p99(),
                        eo.checkpointDuration().p99(), checkpoints, TARGET_EFFECT_CHECKPOINT_P99_VS_EO,
                        verdict(checkpoints <= TARGET_EFFECT_CHECKPOINT_P99_VS_EO)));
            }));
        }
        throughputRatio(EXACTLY_ONCE_WITH_ONE_UPDATE_EFFECT, INBOX).ifPresent(ratio -> text.append(String.format(
                Locale.ROOT, "EO + one-UPDATE effect / hand-written inbox: throughput %.2f, CPU per record %.2f%n",
                ratio, cpuRatio(EXACTLY_ONCE_WITH_ONE_UPDATE_EFFECT, INBOX).orElseThrow())));
        effectScaling().ifPresent(ratio -> text.append(String.format(Locale.ROOT,
                "2 ms effect updating its account (keys), 5%% with a fee, effects/s at parallelism 4 / 1: %.2f"
                        + " (target >= %.2f: %s)%n", ratio, TARGET_EFFECT_SCALING, verdict(ratio >= TARGET_EFFECT_SCALING))));
        throughputRatio(timedEffect(4, true), timedEffect(4, false)).ifPresent(ratio -> text.append(String.format(
                Locale.ROOT, "the same at parallelism 4, with the fee account / without: %.2f (target >= %.2f: %s)%n",
                ratio, TARGET_HOT_ACCOUNT, verdict(ratio >= TARGET_HOT_ACCOUNT))));
        for (ScenarioResult r : results) {
            if (r.eventsTableUpdates().updates() >= 0) {
                text.append(String.format(Locale.ROOT, "%s: events table updates %,d, of which HOT %,d (%.1f%%)%n",
                        r.name(), r.eventsTableUpdates().updates(), r.eventsTableUpdates().hot(),
                        100 * r.eventsTableUpdates().hotShare()));
            }
        }
        double rawTarget = settings.postgresDurable() ? TARGET_EO_VS_DURABLE_RAW : TARGET_EO_VS_RAW_FSYNC_OFF;
        throughputRatio(EXACTLY_ONCE, RAW_LIMIT).ifPresent(ratio -> text.append(String.format(Locale.ROOT,
                "EO / raw limit throughput: %.2f (target >= %.2f: %s)%n", ratio, rawTarget, verdict(ratio >= rawTarget))));
        compareWithKafkaOnly(text, KAFKA_STREAMS, "Kafka Streams", TARGET_EO_VS_KAFKA_STREAMS);
        compareWithKafkaOnly(text, COPIER, "copier", TARGET_EO_VS_COPIER);
        throughputRatio(JDBC_AT_LEAST_ONCE, AT_LEAST_ONCE).ifPresent(ratio -> text.append(String.format(Locale.ROOT,
                "JdbcSink ALO / onceflow ALO throughput: %.2f, CPU per record: %.2f (throughput >= %.2f: %s)%n",
                ratio, cpuRatio(JDBC_AT_LEAST_ONCE, AT_LEAST_ONCE).orElseThrow(), JDBC_SINK_GOOD_ENOUGH,
                ratio >= JDBC_SINK_GOOD_ENOUGH ? "within 10%, the JdbcSink would do for at-least-once"
                        : "not within 10%, keep onceflow's writer")));
        result(EXACTLY_ONCE).ifPresent(eo -> {
            text.append(String.format(Locale.ROOT, "EO dedup state: %.1f B per tracked id (target <= %.0f: %s)%n",
                    eo.stateBytesPerTrackedId(), TARGET_STATE_BYTES_PER_ID,
                    verdict(eo.stateBytesPerTrackedId() <= TARGET_STATE_BYTES_PER_ID)));
            long bound = latencyBoundMillis();
            long worst = Math.max(eo.kafkaVisibility().p99(), eo.postgresVisibility().p99());
            text.append(String.format(Locale.ROOT, "EO p99 visibility: Kafka %d ms, PostgreSQL %d ms (target <= %d ms: %s)%n",
                    eo.kafkaVisibility().p99(), eo.postgresVisibility().p99(), bound, verdict(worst <= bound)));
            for (long preloaded : settings.preloadedIds()) {
                result(preloadedName(preloaded)).ifPresent(r -> text.append(String.format(Locale.ROOT,
                        "EO throughput with %s ids preloaded / with none: %.2f%n", compact(preloaded),
                        r.recordsPerSecond() / eo.recordsPerSecond())));
            }
            text.append(String.format(Locale.ROOT, "EO payload throughput: %.1f MB/s (%d B payloads)%n",
                    megabytesPerSecond(eo, settings.payloadBytes()), settings.payloadBytes()));
            for (int bytes : settings.payloadSizes()) {
                result(withPayload(EXACTLY_ONCE, bytes)).ifPresent(sized -> text.append(String.format(Locale.ROOT,
                        "EO with %d B payloads: %,.0f records/s, %.1f MB/s; / raw limit at that size: %s%n", bytes,
                        sized.recordsPerSecond(), megabytesPerSecond(sized, bytes),
                        throughputRatio(sized.name(), withPayload(RAW_LIMIT, bytes))
                                .map(ratio -> String.format(Locale.ROOT, "%.2f", ratio)).orElse("-"))));
            }
            result(EXACTLY_ONCE_FAST_CHECKPOINTS).ifPresent(fast -> {
                long fastBound = TimeUtils.parseDuration(BenchSettings.FAST_CHECKPOINT_INTERVAL).toMillis()
                        + FAST_CHECKPOINT_SLACK_MILLIS;
                long fastWorst = Math.max(fast.kafkaVisibility().p99(), fast.postgresVisibility().p99());
                double fastRatio = fast.recordsPerSecond() / eo.recordsPerSecond();
                text.append(String.format(Locale.ROOT, "EO with %s checkpoints: p99 visibility Kafka %d ms, PostgreSQL"
                                + " %d ms (target <= %d ms: %s); throughput / with %s: %.2f (target >= %.2f: %s)%n",
                        BenchSettings.FAST_CHECKPOINT_INTERVAL, fast.kafkaVisibility().p99(),
                        fast.postgresVisibility().p99(), fastBound, verdict(fastWorst <= fastBound),
                        settings.checkpointInterval(), fastRatio, TARGET_FAST_CHECKPOINTS_VS_EO,
                        verdict(fastRatio >= TARGET_FAST_CHECKPOINTS_VS_EO)));
            });
        });
        return text.toString();
    }

    /** Effects/s of the 2 ms effect at parallelism 4 over that at 1. */
    private Optional<Double> effectScaling() {
        return throughputRatio(timedEffect(4, true), timedEffect(1, true));
    }

    private long latencyBoundMillis() {
        return settings.checkpointIntervalDuration().plus(Duration.ofSeconds(1)).toMillis();
    }

    private static String pair(Percentiles p) {
        return p.count() == 0 ? "-" : String.format(Locale.ROOT, "%,d / %,d", p.p50(), p.p99());
    }

    private static String verdict(boolean met) {
        return met ? "met" : "NOT met";
    }

    void writeJson(Path file) throws IOException {
        Map<String, Object> json = new LinkedHashMap<>();
        json.put("settings", settings.toString());
        json.put("input", input.toString());
        json.put("postgresCpuMeasured", postgresCpuMeasured);
        List<Map<String, Object>> scenarios = new ArrayList<>();
        for (ScenarioResult r : results) {
            Map<String, Object> scenario = new LinkedHashMap<>();
            scenario.put("name", r.name());
            scenario.put("inputRecords", r.inputRecords());
            scenario.put("recordsPerSecond", r.recordsPerSecond());
            scenario.put("cpuSecondsPerMillionRecords", r.cpuSecondsPerMillion());
            scenario.put("postgresCpuShare", r.postgresCpuShare());
            scenario.put("peakRssBytes", r.peakRssBytes());
            scenario.put("kafkaVisibilityMillis", r.kafkaVisibility());
            scenario.put("postgresVisibilityMillis", r.postgresVisibility());
            scenario.put("effectAppliedMillis", r.effectApplied());
            if (r.eventsTableUpdates().updates() >= 0) {
                scenario.put("eventsTableUpdates", r.eventsTableUpdates().updates());
                scenario.put("eventsTableHotUpdates", r.eventsTableUpdates().hot());
            }
            scenario.put("checkpointDurationMillis", r.checkpointDuration());
            scenario.put("trackedIds", r.trackedIds());
            scenario.put("dedupStateBytes", r.dedupStateBytes());
            scenario.put("dedupStateBytesPerTrackedId", r.stateBytesPerTrackedId());
            scenario.put("loadAverageAtStart", r.loadAverage().atStart());
            scenario.put("loadAverageAtEnd", r.loadAverage().atEnd());
            scenarios.add(scenario);
        }
        json.put("scenarios", scenarios);
        Map<String, Object> ratios = new LinkedHashMap<>();
        throughputRatio(EXACTLY_ONCE, AT_LEAST_ONCE).ifPresent(ratio -> ratios.put("eoOverAlo", ratio));
        List<Double> aloOverEoPerPair = aloOverEoPerPair();
        if (aloOverEoPerPair.size() > 1) {
            ratios.put("aloOverEoMedianOfPairs", median(aloOverEoPerPair));
        }
        throughputRatio(EXACTLY_ONCE, RAW_LIMIT).ifPresent(ratio -> ratios.put("eoOverRawLimit", ratio));
        throughputRatio(EXACTLY_ONCE_FAST_CHECKPOINTS, EXACTLY_ONCE).ifPresent(ratio -> ratios.put("eoFastOverEo", ratio));
        throughputRatio(EXACTLY_ONCE_WITH_EFFECT, EXACTLY_ONCE).ifPresent(ratio -> ratios.put("eoEffectOverEo", ratio));
        throughputRatio(EXACTLY_ONCE_WITH_EFFECT_AND_KEYS, EXACTLY_ONCE)
                .ifPresent(ratio -> ratios.put("eoEffectWithKeysOverEo", ratio));
        throughputRatio(EXACTLY_ONCE_WITH_ONE_UPDATE_EFFECT, EXACTLY_ONCE)
                .ifPresent(ratio -> ratios.put("eoOneUpdateEffectOverEo", ratio));
        result(EXACTLY_ONCE_WITH_EFFECT).ifPresent(effect -> result(EXACTLY_ONCE).ifPresent(eo -> ratios.put(
                "eoEffectCheckpointP99OverEo", effect.checkpointDuration().p99() / (double) eo.checkpointDuration().p99())));
        throughputRatio(EXACTLY_ONCE_WITH_ONE_UPDATE_EFFECT, INBOX)
                .ifPresent(ratio -> ratios.put("eoOneUpdateEffectOverInbox", ratio));
        cpuRatio(EXACTLY_ONCE_WITH_ONE_UPDATE_EFFECT, INBOX)
                .ifPresent(ratio -> ratios.put("eoOneUpdateEffectCpuOverInboxCpu", ratio));
        effectScaling().ifPresent(ratio -> ratios.put("sleepEffectP4OverP1", ratio));
        throughputRatio(timedEffect(4, true), timedEffect(4, false))
                .ifPresent(ratio -> ratios.put("sleepEffectWithFeeOverWithout", ratio));
        throughputRatio(EXACTLY_ONCE, KAFKA_STREAMS).ifPresent(ratio -> ratios.put("eoOverKafkaStreams", ratio));
        cpuRatio(KAFKA_STREAMS, EXACTLY_ONCE).ifPresent(ratio -> ratios.put("kafkaStreamsCpuOverEoCpu", ratio));
        throughputRatio(EXACTLY_ONCE, COPIER).ifPresent(ratio -> ratios.put("eoOverCopier", ratio));
        cpuRatio(COPIER, EXACTLY_ONCE).ifPresent(ratio -> ratios.put("copierCpuOverEoCpu", ratio));
        throughputRatio(JDBC_AT_LEAST_ONCE, AT_LEAST_ONCE).ifPresent(ratio -> ratios.put("jdbcAloOverAlo", ratio));
        cpuRatio(JDBC_AT_LEAST_ONCE, AT_LEAST_ONCE).ifPresent(ratio -> ratios.put("jdbcAloCpuOverAloCpu", ratio));
        for (int bytes : settings.payloadSizes()) {
            result(withPayload(EXACTLY_ONCE, bytes)).ifPresent(sized -> ratios.put("eoMegabytesPerSecondWith" + bytes
                    + "ByteRecords", megabytesPerSecond(sized, bytes)));
            throughputRatio(withPayload(EXACTLY_ONCE, bytes), withPayload(RAW_LIMIT, bytes))
                    .ifPresent(ratio -> ratios.put("eoOverRawLimitWith" + bytes + "ByteRecords", ratio));
        }
        for (long preloaded : settings.preloadedIds()) {
            throughputRatio(preloadedName(preloaded), EXACTLY_ONCE)
                    .ifPresent(ratio -> ratios.put("eoWith" + compact(preloaded) + "IdsOverEo", ratio));
        }
        json.put("ratios", ratios);
        new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT).writeValue(file.toFile(), json);
    }
}
