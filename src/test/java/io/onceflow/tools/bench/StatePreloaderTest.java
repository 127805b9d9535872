package io.onceflow.tools.bench;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.api.Event;
import io.onceflow.dedup.DeduplicateByMessageId;
import io.onceflow.dedup.MessageIdKey;
import io.onceflow.dedup.MessageIdKeyTypeInfo;
import io.onceflow.job.OnceflowPipeline;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.PipelineOptions;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.configuration.StateRecoveryOptions;
import org.apache.flink.core.execution.RecoveryClaimMode;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.testutils.MiniClusterResourceConfiguration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.util.TestStreamEnvironment;
import org.apache.flink.test.junit5.InjectMiniCluster;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.apache.flink.util.CloseableIterator;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;

/**
 * The benchmark's preloaded dedup state is the job's: a dedup restored from the preloader's savepoint,
 * as the state scenarios restore it (claimed, at another parallelism, with the job's settings:
 * RocksDB, generic types off), drops every preloaded id and forwards every other. So a state-growth
 * figure measures a dedup that really holds N ids.
 */
class StatePreloaderTest {
    private static final long PRELOADED = 3_000;
    private static final Duration TTL = Duration.ofDays(7);

    @RegisterExtension
    static final MiniClusterExtension FLINK = new MiniClusterExtension(new MiniClusterResourceConfiguration.Builder()
            .setNumberTaskManagers(1)
            .setNumberSlotsPerTaskManager(3)
            .build());

    @Test
    void aDedupRestoredFromThePreloadDropsEveryPreloadedIdAndForwardsTheRest(
            @InjectMiniCluster MiniCluster cluster, @TempDir Path savepoints) throws Exception {
        Configuration jobSettings = new Configuration();
        jobSettings.set(StateBackendOptions.STATE_BACKEND, "rocksdb");
        jobSettings.set(PipelineOptions.GENERIC_TYPES, false);
        String savepoint = new StatePreloader(cluster, 2, Duration.ofSeconds(2))
                .preload(PRELOADED, TTL, jobSettings, savepoints.toUri().toString());

        List<Event> input = new ArrayList<>();
        for (long i = 0; i < PRELOADED; i += 3) {
            input.add(event(StatePreloader.preloadedId(i)));
        }
        Set<String> newIds = new HashSet<>();
        for (int i = 0; i < 500; i++) {
            newIds.add(UUID.randomUUID().toString());
        }
        newIds.add("not-a-uuid");
        newIds.forEach(id -> input.add(event(id)));

        Configuration restoring = new Configuration(jobSettings);
        restoring.set(StateRecoveryOptions.SAVEPOINT_PATH, savepoint);
        restoring.set(StateRecoveryOptions.SAVEPOINT_IGNORE_UNCLAIMED_STATE, true);
        restoring.set(StateRecoveryOptions.RESTORE_MODE, RecoveryClaimMode.CLAIM);
        StreamExecutionEnvironment env = new TestStreamEnvironment(cluster, restoring, 3, List.of(), List.of());
        Set<String> forwarded = new HashSet<>();
        try (CloseableIterator<Event> output = env
                .fromData(TypeInformation.of(Event.class), input.toArray(new Event[0]))
                .keyBy(new MessageIdKey.Selector(), MessageIdKeyTypeInfo.INSTANCE)
                .process(new DeduplicateByMessageId(TTL), TypeInformation.of(Event.class))
                .uid(OnceflowPipeline.DEDUP_UID)
                .executeAndCollect("restored dedup")) {
            output.forEachRemaining(event -> forwarded.add(event.messageId));
        }
        assertThat(forwarded).as("ids the restored dedup forwarded").isEqualTo(newIds);
    }

    private static Event event(String id) {
        return new Event(id, new byte[0], "test", 0, 0, 0L, new HashMap<>());
    }
}
