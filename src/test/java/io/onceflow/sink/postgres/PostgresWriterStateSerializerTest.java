package io.onceflow.sink.postgres;

import io.onceflow.api.Event;
import io.onceflow.sink.postgres.internal.PostgresWriterState;
import io.onceflow.sink.postgres.internal.PostgresWriterStateSerializer;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.junit.jupiter.api.Test;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class PostgresWriterStateSerializerTest {
    private final PostgresWriterStateSerializer serializer = new PostgresWriterStateSerializer();

    @Test
    void roundTripWithDeferredEventsKeepsEveryField() throws IOException {
        Map<String, byte[]> headers = new HashMap<>();
        headers.put("trace", "t-1".getBytes(StandardCharsets.UTF_8));
        headers.put("empty", null);
        Event full = new Event("id-1", "{\"a\":1}".getBytes(StandardCharsets.UTF_8), "orders", 3, 42, 1700L, headers);
        full.sourceKey = "k".getBytes(StandardCharsets.UTF_8);
        Event sparse = new Event("x".repeat(70_000), null, null, 0, 0, 0, new HashMap<>());
        PostgresWriterState state = new PostgresWriterState(991, List.of(full, sparse));

        PostgresWriterState read = serializer.deserialize(serializer.getVersion(), serializer.serialize(state));

        assertThat(serializer.getVersion()).isEqualTo(3);
        assertThat(read.horizon()).isEqualTo(991);
        assertThat(read.deferredEvents()).containsExactly(full, sparse);
        Event first = read.deferredEvents().get(0);
        assertThat(first.headers).containsOnlyKeys("trace", "empty");
        assertThat(first.headers.get("trace")).isEqualTo(headers.get("trace"));
        assertThat(first.headers.get("empty")).isNull();
        assertThat(first.sourceKey).isEqualTo(full.sourceKey);
        assertThat(read.deferredEvents().get(1).sourceKey).isNull();
    }

    @Test
    void versionTwoIsTheHorizonAloneAndIsStillRead() throws IOException {
        // Pins the savepoint format of earlier releases: checkpoints they took must restore.
        DataOutputSerializer version2 = new DataOutputSerializer(8);
        version2.writeLong(77);

        assertThat(serializer.deserialize(2, version2.getCopyOfBuffer())).isEqualTo(new PostgresWriterState(77));
    }

    @Test
    void refusesAnUnknownVersionAndTrailingBytes() throws IOException {
        byte[] bytes = serializer.serialize(new PostgresWriterState(5));
        assertThatThrownBy(() -> serializer.deserialize(4, bytes))
                .isInstanceOf(IOException.class)
                .hasMessageContaining("version 4")
                .hasMessageContaining("newer onceflow");

        DataOutputSerializer trailing = new DataOutputSerializer(16);
        trailing.writeLong(5);
        trailing.writeInt(0);
        trailing.writeInt(7);
        assertThatThrownBy(() -> serializer.deserialize(3, trailing.getCopyOfBuffer()))
                .isInstanceOf(IOException.class)
                .hasMessageContaining("unexpected bytes");
    }
}
