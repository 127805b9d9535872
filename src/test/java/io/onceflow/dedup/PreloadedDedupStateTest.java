package io.onceflow.dedup;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.ingest.Event;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.configuration.StateRecoveryOptions;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.runtime.testutils.MiniClusterResourceConfiguration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.apache.flink.util.CloseableIterator;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;

/**
 * The benchmark's preloaded dedup state is the job's: a dedup operator restored from it (at another
 * parallelism) drops every preloaded id and forwards every other, so a state-growth figure measures
 * a dedup that really holds N ids.
 */
class PreloadedDedupStateTest {
    private static final String DEDUP_UID = "dedup";
    private static final long SEED = 42;
    private static final int PRELOADED = 3_000;
    private static final Duration TTL = Duration.ofDays(7);

    @RegisterExtension
    static final MiniClusterExtension FLINK = new MiniClusterExtension(new MiniClusterResourceConfiguration.Builder()
            .setNumberTaskManagers(1)
            .setNumberSlotsPerTaskManager(3)
            .build());

    @Test
    void aDedupRestoredFromThePreloadedStateDropsEveryPreloadedIdAndForwardsTheRest(@TempDir Path savepoints)
            throws Exception {
        String savepoint = savepoints.resolve("preloaded").toUri().toString();
        Configuration rocksDb = new Configuration();
        rocksDb.set(StateBackendOptions.STATE_BACKEND, "rocksdb");
        StreamExecutionEnvironment bootstrap = StreamExecutionEnvironment.getExecutionEnvironment(rocksDb);
        PreloadedDedupState.bootstrap(bootstrap, DEDUP_UID, PRELOADED, SEED, TTL, 2, savepoint);
        bootstrap.execute("bootstrap");

        List<Event> input = new ArrayList<>();
        for (long i = 0; i < PRELOADED; i += 3) {
            input.add(event(PreloadedDedupState.id(SEED, i).toString()));
        }
        Set<String> newIds = new HashSet<>();
        for (int i = 0; i < 500; i++) {
            String id = UUID.randomUUID().toString();
            newIds.add(id);
            input.add(event(id));
        }
        input.add(event("not-a-uuid"));
        newIds.add("not-a-uuid");

        Configuration restoring = new Configuration(rocksDb);
        restoring.set(StateRecoveryOptions.SAVEPOINT_PATH, savepoint);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(restoring);
        env.setParallelism(3);
        Set<String> forwarded = new HashSet<>();
        try (CloseableIterator<Event> output = env
                .fromData(input, TypeInformation.of(Event.class))
                .keyBy(new MessageIdKey.Selector(), MessageIdKeyTypeInfo.INSTANCE)
                .process(new DeduplicateByMessageId(TTL), TypeInformation.of(Event.class))
                .uid(DEDUP_UID)
                .executeAndCollect("restored dedup")) {
            output.forEachRemaining(event -> forwarded.add(event.messageId));
        }
        assertThat(forwarded).as("ids the restored dedup forwarded").isEqualTo(newIds);
    }

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

    private static Event event(String id) {
        return new Event(id, new byte[0], "test", 0, 0, 0L, new HashMap<>());
    }
}
