package io.onceflow.dedup;

import java.time.Duration;
import java.util.Arrays;
import java.util.SplittableRandom;
import java.util.UUID;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.connector.datagen.source.GeneratorFunction;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.state.api.OperatorIdentifier;
import org.apache.flink.state.api.OperatorTransformation;
import org.apache.flink.state.api.SavepointWriter;
import org.apache.flink.state.api.functions.KeyedStateBootstrapFunction;
import org.apache.flink.state.rocksdb.EmbeddedRocksDBStateBackend;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * Test tooling: writes, with the State Processor API, a savepoint whose dedup state (the operator
 * of {@code uid}, {@link DeduplicateByMessageId}'s state and TTL) already holds N random UUID ids,
 * for the benchmark's state-growth scenarios. Running N events through the dedup operator does a
 * read and a write per id and slowed to about 20,000 ids/s at 40M ids on 2 cores (docs/benchmarks.md),
 * so 100M took over an hour.
 *
 * <p>Here each id is only written, and each bootstrap subtask receives its ids in key-group order
 * (one source subtask, generating the ids in a few passes, each pass the ids of a band of key
 * groups), so RocksDB's flushed files barely overlap and compaction has little to merge. The
 * savepoint is in the canonical format; a job restores it at any parallelism.
 */
public final class PreloadedDedupState {
    /** Bands of key groups, one pass over all ids each: more passes, less memory (16 bytes per id in a band). */
    private static final int PASSES = 8;

    private PreloadedDedupState() {}

    /** The {@code i}-th preloaded id: a random UUID, deterministic in {@code seed} and {@code i}. */
    public static UUID id(long seed, long i) {
        SplittableRandom random = new SplittableRandom(seed + i);
        return new UUID(random.nextLong(), random.nextLong());
    }

    /**
     * Adds to {@code env} the job that writes the savepoint; {@code env.execute()} runs it.
     *
     * @param parallelism the bootstrap's parallelism (its max parallelism is Flink's default for it,
     *                    which a job restoring the savepoint adopts)
     */
    public static void bootstrap(StreamExecutionEnvironment env, String uid, long ids, long seed, Duration ttl,
            int parallelism, String savepointPath) {
        int maxParallelism = KeyGroupRangeAssignment.computeDefaultMaxParallelism(parallelism);
        DataStream<MessageIdKey> keys = env.fromSource(
                        new DataGeneratorSource<>(new KeyGroupOrderedIds(ids, seed, parallelism, maxParallelism), ids,
                                MessageIdKeyTypeInfo.INSTANCE),
                        WatermarkStrategy.noWatermarks(), "Preloaded ids in key-group order")
                .setParallelism(1);
        SavepointWriter.newSavepoint(env, new EmbeddedRocksDBStateBackend(), maxParallelism)
                .withOperator(OperatorIdentifier.forUid(uid), OperatorTransformation.bootstrapWith(keys)
                        .keyBy(key -> key, MessageIdKeyTypeInfo.INSTANCE)
                        .transform(new RememberIds(ttl)))
                .write(savepointPath);
    }

    /** Writes each key into the dedup's seen-ids state, as {@link DeduplicateByMessageId} does for a first occurrence. */
    private static final class RememberIds extends KeyedStateBootstrapFunction<MessageIdKey, MessageIdKey> {
        private static final long serialVersionUID = 1L;
        private final Duration ttl;
        private transient ValueState<Boolean> seen;

        RememberIds(Duration ttl) {
            this.ttl = ttl;
        }

        @Override
        public void open(OpenContext openContext) {
            seen = getRuntimeContext().getState(DeduplicateByMessageId.seenStateDescriptor(ttl));
        }

        @Override
        public void processElement(MessageIdKey key, Context context) throws Exception {
            seen.update(Boolean.TRUE);
        }
    }

    /**
     * Id {@code index} of the sequence, for one source subtask that is called with 0, 1, 2...: the
     * ids of pass 0's key groups first, ordered so that every bootstrap subtask gets its key groups
     * in increasing order and all subtasks get work at once.
     */
    static final class KeyGroupOrderedIds implements GeneratorFunction<Long, MessageIdKey> {
        private static final long serialVersionUID = 1L;
        private final long ids;
        private final long seed;
        private final int parallelism;
        private final int maxParallelism;
        private transient int[] order;
        private transient int ordersPerPass;
        private transient int pass;
        private transient long[] high;
        private transient long[] low;
        private transient int next;

        KeyGroupOrderedIds(long ids, long seed, int parallelism, int maxParallelism) {
            this.ids = ids;
            this.seed = seed;
            this.parallelism = parallelism;
            this.maxParallelism = maxParallelism;
        }

        @Override
        public void open(SourceReaderContext readerContext) {
            // order of a key group: its rank inside its subtask's range, then the subtask
            order = new int[maxParallelism];
            int maxRank = 0;
            for (int keyGroup = 0; keyGroup < maxParallelism; keyGroup++) {
                int subtask = KeyGroupRangeAssignment.computeOperatorIndexForKeyGroup(maxParallelism, parallelism, keyGroup);
                KeyGroupRange range = KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex(
                        maxParallelism, parallelism, subtask);
                int rank = keyGroup - range.getStartKeyGroup();
                order[keyGroup] = rank * parallelism + subtask;
                maxRank = Math.max(maxRank, rank + 1);
            }
            ordersPerPass = (maxRank + PASSES - 1) / PASSES * parallelism;
            high = new long[0];
            low = new long[0];
        }

        @Override
        public MessageIdKey map(Long index) {
            while (next == high.length) {
                fillPass(pass++);
            }
            MessageIdKey key = MessageIdKey.ofUuid(high[next], low[next]);
            next++;
            return key;
        }

        /** Generates every id, keeps those of this pass's key groups, sorted by key-group order. */
        private void fillPass(int passIndex) {
            if (passIndex >= PASSES) {
                throw new IllegalStateException("asked for more than " + ids + " ids");
            }
            int firstOrder = passIndex * ordersPerPass;
            int[] counts = new int[ordersPerPass + 1];
            for (long i = 0; i < ids; i++) {
                int slot = slotInPass(id(seed, i), firstOrder);
                if (slot >= 0) {
                    counts[slot + 1]++;
                }
            }
            for (int slot = 0; slot < ordersPerPass; slot++) {
                counts[slot + 1] += counts[slot];
            }
            high = new long[counts[ordersPerPass]];
            low = new long[high.length];
            int[] cursor = Arrays.copyOf(counts, ordersPerPass);
            for (long i = 0; i < ids; i++) {
                UUID id = id(seed, i);
                int slot = slotInPass(id, firstOrder);
                if (slot >= 0) {
                    int at = cursor[slot]++;
                    high[at] = id.getMostSignificantBits();
                    low[at] = id.getLeastSignificantBits();
                }
            }
            next = 0;
        }

        /** Where {@code id} goes in the pass starting at key-group order {@code firstOrder}, or -1. */
        private int slotInPass(UUID id, int firstOrder) {
            MessageIdKey key = MessageIdKey.ofUuid(id.getMostSignificantBits(), id.getLeastSignificantBits());
            int slot = order[KeyGroupRangeAssignment.assignToKeyGroup(key, maxParallelism)] - firstOrder;
            return slot >= 0 && slot < ordersPerPass ? slot : -1;
        }
    }
}
