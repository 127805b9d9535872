package io.onceflow.sink.postgres.internal;

import io.onceflow.api.Event;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The rows of a batch being filled, one per message id. An id repeated inside one batch is merged
 * here, counting its deliveries, because {@code ON CONFLICT DO UPDATE} refuses to touch the same
 * row twice in one statement. The first delivery's payload and source position are kept, as the
 * table keeps the first row.
 *
 * <p>A row's values are copied out of the event when it is added, and the event is not kept: with
 * object reuse on, an upstream operator may legitimately change an event after emitting it.
 */
final class RowBuffer {
    private final int capacity;
    /** Insertion order is kept so that rows are written in arrival order. */
    private final Map<String, PendingRow> rowsById = new LinkedHashMap<>();

    RowBuffer(int capacity) {
        this.capacity = capacity;
    }

    /** @return true if the buffer is now full and should be written */
    boolean add(Event event) {
        PendingRow row = rowsById.get(event.messageId);
        if (row == null) {
            row = new PendingRow(event);
            rowsById.put(event.messageId, row);
        }
        row.deliveries++;
        return rowsById.size() >= capacity;
    }

    boolean isEmpty() {
        return rowsById.isEmpty();
    }

    /** Empties the buffer into rows that no longer depend on it, in arrival order. */
    Rows take() {
        Rows rows = new Rows(rowsById.size());
        int i = 0;
        for (Map.Entry<String, PendingRow> entry : rowsById.entrySet()) {
            PendingRow row = entry.getValue();
            rows.ids[i] = entry.getKey();
            rows.payloads[i] = row.payload;
            rows.topics[i] = row.sourceTopic;
            rows.partitions[i] = row.sourcePartition;
            rows.offsets[i] = row.sourceOffset;
            rows.deliveries[i] = row.deliveries;
            i++;
        }
        rowsById.clear();
        return rows;
    }

    /** The values of the first event seen for an id in this batch, and how often the id arrived. */
    private static final class PendingRow {
        final String payload;
        final String sourceTopic;
        final int sourcePartition;
        final long sourceOffset;
        int deliveries;

        PendingRow(Event first) {
            this.payload = new String(first.payload, StandardCharsets.UTF_8);
            this.sourceTopic = first.sourceTopic;
            this.sourcePartition = first.sourcePartition;
            this.sourceOffset = first.sourceOffset;
        }
    }
}
