package io.onceflow.tools.bench;

import java.nio.file.Path;
import java.time.Duration;

/**
 * What the scenarios of one run share: the settings, the input topic (already full) and what it holds,
 * the meter of CPU time, and the directory for checkpoints, state and logs.
 *
 * @param inputRecords records in the input topic
 * @param uniqueIds distinct message ids among them
 */
record Workload(BenchSettings settings, String inputTopic, long inputRecords, long uniqueIds, ResourceMeter meter,
        Path workDirectory) {

    /** How long a scenario may take to work through the input: generous, a failure shows long before. */
    Duration backlogTimeout() {
        return Duration.ofSeconds(120 + inputRecords / 1000);
    }
}
