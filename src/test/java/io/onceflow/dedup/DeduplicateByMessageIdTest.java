package io.onceflow.dedup;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.onceflow.api.Event;
import io.onceflow.testing.ProjectFlinkConf;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.apache.commons.lang3.reflect.FieldUtils;
import org.apache.commons.lang3.reflect.MethodUtils;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.state.rocksdb.EmbeddedRocksDBStateBackend;
import org.apache.flink.state.rocksdb.RocksDBKeyedStateBackend;
import org.apache.flink.streaming.api.operators.KeyedProcessOperator;
import org.apache.flink.streaming.util.KeyedOneInputStreamOperatorTestHarness;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.rocksdb.ColumnFamilyHandle;
import org.rocksdb.RocksDB;

class DeduplicateByMessageIdTest {
    private static final Duration TTL = Duration.ofMinutes(10);

    private KeyedOneInputStreamOperatorTestHarness<MessageIdKey, Event, Event> harness;

    @BeforeEach
    void open() throws Exception {
        harness = newHarness();
        harness.open();
    }

    @AfterEach
    void close() throws Exception {
        harness.close();
    }

    private static KeyedOneInputStreamOperatorTestHarness<MessageIdKey, Event, Event> newHarness() throws Exception {
        return new KeyedOneInputStreamOperatorTestHarness<>(
                new KeyedProcessOperator<>(new DeduplicateByMessageId(TTL)), new MessageIdKey.Selector(),
                MessageIdKeyTypeInfo.INSTANCE);
    }

    private static Event event(String id, long offset) {
        return new Event(id, ("{\"id\":\"" + id + "\"}").getBytes(StandardCharsets.UTF_8), "in", 0, offset, 0L, Map.of());
    }

    @Test
    void forwardsTheFirstOccurrenceOfEachIdAndDropsTheRest() throws Exception {
        harness.processElement(event("a", 0), 0);
        harness.processElement(event("b", 1), 0);
        harness.processElement(event("a", 2), 0);
        harness.processElement(event("a", 3), 0);
        harness.processElement(event("c", 4), 0);

        assertThat(harness.extractOutputValues()).extracting(e -> e.messageId + "@" + e.sourceOffset)
                .containsExactly("a@0", "b@1", "c@4");
        assertThat(harness.numKeyedStateEntries()).as("one entry per distinct id").isEqualTo(3);
    }

    @Test
    void registersNoTimersBecauseTheTtlDoesTheCleanup() throws Exception {
        harness.processElement(event("a", 0), 0);
        assertThat(harness.numProcessingTimeTimers()).isZero();
        assertThat(harness.numEventTimeTimers()).isZero();
    }

    @Test
    void anIdIsForgottenOnlyAfterItsTtlExpires() throws Exception {
        harness.setStateTtlProcessingTime(0);
        harness.processElement(event("a", 0), 0);

        harness.setStateTtlProcessingTime(TTL.toMillis() - 1);
        harness.processElement(event("a", 1), 0);
        assertThat(harness.extractOutputValues()).hasSize(1);

        harness.setStateTtlProcessingTime(TTL.toMillis() + 1);
        harness.processElement(event("a", 2), 0);
        assertThat(harness.extractOutputValues()).extracting(e -> e.sourceOffset).containsExactly(0L, 2L);
        assertThat(harness.numKeyedStateEntries()).isEqualTo(1);
    }

    @Test
    void aDuplicateDoesNotExtendTheTtlButANewFirstOccurrenceDoes() throws Exception {
        harness.setStateTtlProcessingTime(0);
        harness.processElement(event("a", 0), 0);
        harness.setStateTtlProcessingTime(TTL.toMillis() / 2);
        harness.processElement(event("a", 1), 0); // dropped; TTL refreshes on create and write only

        harness.setStateTtlProcessingTime(TTL.toMillis() + 1);
        harness.processElement(event("a", 2), 0); // expired: passes, and is remembered again from now
        harness.setStateTtlProcessingTime(TTL.toMillis() + 2);
        harness.processElement(event("a", 3), 0);

        assertThat(harness.extractOutputValues()).extracting(e -> e.sourceOffset).containsExactly(0L, 2L);
    }

    @Test
    void rememberedIdsSurviveASnapshotAndRestore() throws Exception {
        harness.processElement(event("a", 0), 0);
        harness.processElement(event("b", 1), 0);
        OperatorSubtaskState snapshot = harness.snapshot(1L, 0L);
        harness.close();

        harness = newHarness();
        harness.initializeState(snapshot);
        harness.open();
        harness.processElement(event("a", 2), 0);
        harness.processElement(event("c", 3), 0);

        assertThat(harness.extractOutputValues()).extracting(e -> e.messageId).containsExactly("c");
        assertThat(harness.numKeyedStateEntries()).isEqualTo(3);
    }

    @Test
    void worksOnRocksDbWithTheCompactionFilterCleanup() throws Exception {
        harness.close();
        harness = newHarness();
        harness.setStateBackend(new EmbeddedRocksDBStateBackend(true));
        harness.open();
        harness.setStateTtlProcessingTime(0);
        harness.processElement(event("a", 0), 0);
        harness.processElement(event("a", 1), 0);
        harness.setStateTtlProcessingTime(TTL.toMillis() + 1);
        harness.processElement(event("a", 2), 0);

        List<Event> output = harness.extractOutputValues();
        assertThat(output).extracting(e -> e.sourceOffset).containsExactly(0L, 2L);
    }

    /**
     * flink-conf/config.yaml turns on bloom filters and universal compaction; state that a job wrote
     * with RocksDB's leveled default (every earlier onceflow release) must restore under them with
     * every id remembered. The leveled state is compacted out of L0 first, so that the restore has to
     * take files of a level that universal compaction treats as one sorted run.
     */
    @Test
    void stateWrittenWithLeveledCompactionRestoresUnderTheClustersRocksDbSettings() throws Exception {
        int ids = 5_000;
        harness.close();
        harness = newHarness();
        harness.setStateBackend(new EmbeddedRocksDBStateBackend(true));
        harness.open();
        for (int id = 0; id < ids; id++) {
            harness.processElement(event("id-" + id, id), 0);
        }
        SeenColumnFamily leveled = SeenColumnFamily.of(harness);
        leveled.db().compactRange(leveled.handle());
        assertThat(leveled.db().getProperty(leveled.handle(), "rocksdb.num-files-at-level0")).as("L0 files after compaction")
                .isEqualTo("0");
        OperatorSubtaskState snapshot = harness.snapshot(1L, 0L);
        harness.close();

        Configuration cluster = ProjectFlinkConf.rocksDbSettings();
        assertThat(cluster.toMap()).containsEntry("state.backend.rocksdb.compaction.style", "UNIVERSAL")
                .containsEntry("state.backend.rocksdb.use-bloom-filter", "true")
                .containsEntry("state.backend.rocksdb.memory.partitioned-index-filters", "true");
        harness = newHarness();
        harness.setStateBackend(new EmbeddedRocksDBStateBackend(true).configure(cluster, getClass().getClassLoader()));
        harness.initializeState(snapshot);
        harness.open();
        for (int id = 0; id <= ids; id++) {
            harness.processElement(event("id-" + id, ids + id), 0);
        }

        assertThat(harness.extractOutputValues()).as("only the one id not seen before the restore")
                .extracting(e -> e.messageId).containsExactly("id-" + ids);
        SeenColumnFamily restored = SeenColumnFamily.of(harness);
        assertThat(restored.db().getLongProperty(restored.handle(), "rocksdb.estimate-num-keys"))
                .as("RocksDB's estimate of the ids in state (the dashboard's)").isEqualTo(ids + 1);
    }

    /** The harness's RocksDB and the dedup state's column family: Flink keeps both internal, hence reflection. */
    private record SeenColumnFamily(RocksDB db, ColumnFamilyHandle handle) {
        static SeenColumnFamily of(KeyedOneInputStreamOperatorTestHarness<MessageIdKey, Event, Event> harness)
                throws ReflectiveOperationException {
            RocksDBKeyedStateBackend<?> backend = (RocksDBKeyedStateBackend<?>) harness.getOperator().getKeyedStateBackend();
            return new SeenColumnFamily((RocksDB) FieldUtils.readField(backend, "db", true), (ColumnFamilyHandle)
                    MethodUtils.invokeMethod(backend, true, "getColumnFamilyHandle", DeduplicateByMessageId.SEEN_STATE_NAME));
        }
    }

    @Test
    void aUuidIdAndANonCanonicalSpellingOfItAreDifferentMessagesOnBothBackends() throws Exception {
        String lower = "0f8e6c2a-3b1d-4e5f-9a7b-c6d5e4f3a2b1";
        String upper = lower.toUpperCase(Locale.ROOT);
        for (boolean rocksDb : new boolean[] {false, true}) {
            harness.close();
            harness = newHarness();
            if (rocksDb) {
                harness.setStateBackend(new EmbeddedRocksDBStateBackend(true));
            }
            harness.open();
            harness.processElement(event(lower, 0), 0);
            harness.processElement(event(upper, 1), 0);
            harness.processElement(event(lower, 2), 0);
            harness.processElement(event(upper, 3), 0);

            assertThat(harness.extractOutputValues()).as(rocksDb ? "RocksDB" : "heap")
                    .extracting(e -> e.messageId + "@" + e.sourceOffset)
                    .containsExactly(lower + "@0", upper + "@1");
        }
    }

    @Test
    void rejectsANonPositiveTtl() {
        assertThatThrownBy(() -> new DeduplicateByMessageId(Duration.ZERO))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("TTL must be positive");
    }
}
