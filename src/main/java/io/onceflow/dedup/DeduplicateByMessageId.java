package io.onceflow.dedup;

import io.onceflow.api.Event;
import java.time.Duration;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.StateTtlConfig;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.metrics.Counter;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.Collector;
import org.apache.flink.util.Preconditions;

/**
 * Forwards the first event of each message id and drops the others while the id is remembered.
 * Keyed by {@link MessageIdKey} (the id's 16 bytes when it is a canonical UUID, else the id); the
 * state of a key is a single "seen" flag with a time-to-live. Key the input with
 * {@link MessageIdKey.Selector} and {@link MessageIdKeyTypeInfo#INSTANCE}.
 *
 * <p>The TTL bounds memory, not correctness of the sinks: a duplicate arriving after its id expired
 * passes. Size it to the longest redelivery window (producer retries, replays from old offsets).
 * State TTL in Flink is processing time: the clock is the TaskManager's, not the event's.
 */
public class DeduplicateByMessageId extends KeyedProcessFunction<MessageIdKey, Event, Event> {
    /** Part of the savepoint format: renaming it loses every remembered id on upgrade. */
    static final String SEEN_STATE_NAME = "seen-message-ids";

    private static final long serialVersionUID = 1L;

    /** How many expired entries the heap backend inspects per state access. */
    private static final int HEAP_CLEANUP_ENTRIES_PER_ACCESS = 10;
    /** How many entries RocksDB's compaction filter processes before refreshing its clock. */
    private static final long ROCKSDB_ENTRIES_BEFORE_TIME_REFRESH = 1000;

    private final Duration ttl;

    private transient ValueState<Boolean> seen;
    private transient Counter firstOccurrences;
    private transient Counter duplicatesDropped;

    public DeduplicateByMessageId(Duration ttl) {
        Preconditions.checkArgument(ttl != null && !ttl.isNegative() && !ttl.isZero(),
                "the dedup TTL must be positive, got %s", ttl);
        this.ttl = ttl;
    }

    /** The state descriptor, with its TTL; exposed for tests that inspect state. */
    static ValueStateDescriptor<Boolean> seenStateDescriptor(Duration ttl) {
        StateTtlConfig ttlConfig = StateTtlConfig.newBuilder(ttl)
                .setUpdateType(StateTtlConfig.UpdateType.OnCreateAndWrite)
                .setStateVisibility(StateTtlConfig.StateVisibility.NeverReturnExpired)
                // the heap backend only drops an expired entry when it is touched: inspect a few per access
                .cleanupIncrementally(HEAP_CLEANUP_ENTRIES_PER_ACCESS, false)
                .cleanupInRocksdbCompactFilter(ROCKSDB_ENTRIES_BEFORE_TIME_REFRESH)
                .build();
        ValueStateDescriptor<Boolean> descriptor = new ValueStateDescriptor<>(SEEN_STATE_NAME, Types.BOOLEAN);
        descriptor.enableTimeToLive(ttlConfig);
        return descriptor;
    }

    @Override
    public void open(OpenContext openContext) {
        seen = getRuntimeContext().getState(seenStateDescriptor(ttl));
        firstOccurrences = getRuntimeContext().getMetricGroup().counter("eventsForwarded");
        duplicatesDropped = getRuntimeContext().getMetricGroup().counter("duplicatesDropped");
    }

    @Override
    public void processElement(Event event, Context ctx, Collector<Event> out) throws Exception {
        if (seen.value() != null) {
            duplicatesDropped.inc();
            return;
        }
        seen.update(Boolean.TRUE);
        firstOccurrences.inc();
        out.collect(event);
    }
}
