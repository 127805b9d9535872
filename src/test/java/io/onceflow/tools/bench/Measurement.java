package io.onceflow.tools.bench;

import java.util.Locale;

/**
 * What every scenario measures the same way, from its start to its result: CPU time (this JVM and
 * PostgreSQL, see {@link ResourceMeter}), the load average at both ends, and this JVM's peak RSS
 * (reset at the start).
 */
final class Measurement {
    private final ResourceMeter meter;
    private final double loadAtStart;
    private final ResourceMeter.CpuTime cpuAtStart;

    private Measurement(ResourceMeter meter) {
        this.meter = meter;
        this.loadAtStart = ResourceMeter.loadAverageNow();
        this.cpuAtStart = meter.cpuTime();
    }

    /** Resets this JVM's peak RSS and takes the CPU time and load average of the start. */
    static Measurement start(ResourceMeter meter) {
        ResourceMeter.resetPeakRss();
        return new Measurement(meter);
    }

    ResourceMeter.CpuTime cpuSoFar() {
        return meter.cpuTime().minus(cpuAtStart);
    }

    ResourceMeter.LoadAverage loadAverage() {
        return ResourceMeter.LoadAverage.since(loadAtStart);
    }

    /** Prints a scenario's throughput as soon as it is known, before the rest of the scenario runs. */
    void sayThroughput(String name, double recordsPerSecond, ResourceMeter.CpuTime cpu) {
        Benchmark.say(String.format(Locale.ROOT,
                "%s: %,.0f records/s, %.1f CPU s (this JVM %.1f, child JVMs %.1f, PostgreSQL %.1f),"
                        + " load average %.1f -> %.1f",
                name, recordsPerSecond, cpu.totalSeconds(), cpu.jvmSeconds(), cpu.childrenSeconds(),
                cpu.postgresSeconds(), loadAtStart, ResourceMeter.loadAverageNow()));
    }

    /**
     * The result of a scenario measured for throughput only (no latencies, checkpoints or dedup
     * state), also printed.
     *
     * @param cpu the scenario's CPU time: {@link #cpuSoFar()}, with child JVMs' if it has some
     * @param peakRssBytes the peak RSS of the processes of the scenario
     */
    ScenarioResult throughputOnly(String name, long records, double seconds, ResourceMeter.CpuTime cpu,
            long peakRssBytes) {
        double recordsPerSecond = records / seconds;
        sayThroughput(name, recordsPerSecond, cpu);
        return new ScenarioResult(name, records, recordsPerSecond, cpu.totalSeconds() / records * 1e6,
                cpu.postgresSeconds() / cpu.totalSeconds(), peakRssBytes, Percentiles.NONE, Percentiles.NONE,
                Percentiles.NONE, Percentiles.NONE, 0, -1, loadAverage(), ScenarioResult.Updates.NONE);
    }
}
