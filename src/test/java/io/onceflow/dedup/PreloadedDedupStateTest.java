package io.onceflow.dedup;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Arrays;
import java.util.HashSet;
import java.util.Set;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.junit.jupiter.api.Test;

/**
 * The preload's ids reach each bootstrap subtask once each and in key-group order, which is what
 * keeps RocksDB's flushed files from overlapping (io.onceflow.tools.bench.StatePreloaderTest checks
 * that the state they make is the dedup's).
 */
class PreloadedDedupStateTest {
    private static final long SEED = 42;
    private static final int PRELOADED = 3_000;

    @Test
    void eachBootstrapSubtaskGetsEveryIdOnceInKeyGroupOrder() throws Exception {
        int parallelism = 2;
        int maxParallelism = KeyGroupRangeAssignment.computeDefaultMaxParallelism(parallelism);
        PreloadedDedupState.KeyGroupOrderedIds ids =
                new PreloadedDedupState.KeyGroupOrderedIds(PRELOADED, SEED, parallelism, maxParallelism);
        ids.open(null);
        Set<MessageIdKey> seen = new HashSet<>();
        int[] lastKeyGroup = new int[parallelism];
        Arrays.fill(lastKeyGroup, -1);
        for (long i = 0; i < PRELOADED; i++) {
            MessageIdKey key = ids.map(i);
            seen.add(key);
            int keyGroup = KeyGroupRangeAssignment.assignToKeyGroup(key, maxParallelism);
            int subtask = KeyGroupRangeAssignment.computeOperatorIndexForKeyGroup(maxParallelism, parallelism, keyGroup);
            assertThat(keyGroup).as("key group of id %s on subtask %s", i, subtask).isGreaterThanOrEqualTo(lastKeyGroup[subtask]);
            lastKeyGroup[subtask] = keyGroup;
        }
        Set<MessageIdKey> expected = new HashSet<>();
        for (long i = 0; i < PRELOADED; i++) {
            expected.add(MessageIdKey.of(PreloadedDedupState.id(SEED, i).toString()));
        }
        assertThat(seen).isEqualTo(expected);
    }
}
