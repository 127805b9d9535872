package io.onceflow.tools.bench;

/**
 * The figures of one benchmark scenario. Latencies and durations are in milliseconds; a figure that
 * does not apply to the scenario (the raw limit has no checkpoints) is {@link Percentiles#NONE} or -1.
 *
 * @param name the scenario, e.g. "exactly-once"
 * @param inputRecords records of the throughput phase
 * @param recordsPerSecond input records processed per second in the throughput phase
 * @param cpuSecondsPerMillion CPU seconds (this JVM + PostgreSQL) per million input records
 * @param postgresCpuShare PostgreSQL's share of those CPU seconds
 * @param peakRssBytes this JVM's peak resident set during the scenario
 * @param kafkaVisibility producer timestamp to visible to a read_committed consumer
 * @param postgresVisibility producer timestamp to committed in PostgreSQL (a sample of the ids)
 * @param effectApplied with an effect function: producer timestamp to the effect applied (the row has its
 *     result), for the same sample
 * @param checkpointDuration end-to-end duration of the completed checkpoints
 * @param trackedIds ids in dedup state at the last checkpoint measured
 * @param dedupStateBytes checkpointed full state size of the dedup task (RocksDB) at that checkpoint
 * @param loadAverage the machine's one-minute load average when the scenario started and ended, so that
 *     a run on a loaded machine shows as one
 * @param eventsTableUpdates with an effect function: the events table's updates and HOT updates
 *     ({@code pg_stat_user_tables}) after the scenario, else {@link Updates#NONE}
 */
record ScenarioResult(
        String name,
        long inputRecords,
        double recordsPerSecond,
        double cpuSecondsPerMillion,
        double postgresCpuShare,
        long peakRssBytes,
        Percentiles kafkaVisibility,
        Percentiles postgresVisibility,
        Percentiles effectApplied,
        Percentiles checkpointDuration,
        long trackedIds,
        long dedupStateBytes,
        ResourceMeter.LoadAverage loadAverage,
        Updates eventsTableUpdates) {

    /** Row updates of a table, and how many of them were HOT (heap-only: no new index entry). */
    record Updates(long updates, long hot) {
        static final Updates NONE = new Updates(-1, -1);

        double hotShare() {
            return updates > 0 ? hot / (double) updates : 0;
        }
    }

    /** Checkpointed dedup state per tracked id, or -1 without state. */
    double stateBytesPerTrackedId() {
        return trackedIds > 0 && dedupStateBytes >= 0 ? dedupStateBytes / (double) trackedIds : -1;
    }
}
