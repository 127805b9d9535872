package io.onceflow.tools.bench;

import java.util.Arrays;

/** p50 and p99 of a set of samples (nearest rank), in the samples' unit. */
record Percentiles(long count, long p50, long p99, long max) {
    static final Percentiles NONE = new Percentiles(0, -1, -1, -1);

    static Percentiles of(long[] samples) {
        if (samples.length == 0) {
            return NONE;
        }
        long[] sorted = samples.clone();
        Arrays.sort(sorted);
        return new Percentiles(sorted.length, rank(sorted, 0.50), rank(sorted, 0.99), sorted[sorted.length - 1]);
    }

    private static long rank(long[] sorted, double quantile) {
        int index = (int) Math.ceil(quantile * sorted.length) - 1;
        return sorted[Math.max(0, Math.min(sorted.length - 1, index))];
    }
}
