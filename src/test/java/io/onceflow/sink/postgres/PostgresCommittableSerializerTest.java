package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.internal.PostgresCommittable;
import io.onceflow.sink.postgres.internal.PostgresCommittableSerializer;
import io.onceflow.sink.postgres.internal.TransactionId;
import java.io.IOException;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.junit.jupiter.api.Test;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;


class PostgresCommittableSerializerTest {
    private final PostgresCommittableSerializer serializer = new PostgresCommittableSerializer();

    @Test
    void roundTrip() throws IOException {
        PostgresCommittable committable = new PostgresCommittable(new TransactionId("orders_pg", 991, 2, 17));

        byte[] bytes = serializer.serialize(committable);

        assertThat(serializer.deserialize(serializer.getVersion(), bytes)).isEqualTo(committable);
    }

    @Test
    void versionOneIsTheGidAsUtf() throws IOException {
        // Pins the savepoint format: a change here must come with a new version.
        DataOutputSerializer expected = new DataOutputSerializer(64);
        expected.writeUTF("onceflow:p:e1:s0:c5");

        assertThat(serializer.getVersion()).isEqualTo(1);
        assertThat(serializer.serialize(new PostgresCommittable(new TransactionId("p", 1, 0, 5))))
                .isEqualTo(expected.getCopyOfBuffer());
    }

    @Test
    void refusesAnUnknownVersionSayingWhatToDo() throws IOException {
        byte[] bytes = serializer.serialize(new PostgresCommittable(new TransactionId("p", 1, 0, 5)));

        assertThatThrownBy(() -> serializer.deserialize(2, bytes))
                .isInstanceOf(IOException.class)
                .hasMessageContaining("version 2")
                .hasMessageContaining("reads version 1")
                .hasMessageContaining("newer onceflow");
    }

    @Test
    void refusesAForeignGidAndTrailingBytes() throws IOException {
        DataOutputSerializer foreign = new DataOutputSerializer(64);
        foreign.writeUTF("xa-branch-17");
        assertThatThrownBy(() -> serializer.deserialize(1, foreign.getCopyOfBuffer()))
                .isInstanceOf(IOException.class)
                .hasMessageContaining("not a onceflow gid");

        DataOutputSerializer trailing = new DataOutputSerializer(64);
        trailing.writeUTF("onceflow:p:e1:s0:c5");
        trailing.writeInt(7);
        assertThatThrownBy(() -> serializer.deserialize(1, trailing.getCopyOfBuffer()))
                .isInstanceOf(IOException.class)
                .hasMessageContaining("unexpected bytes");
    }
}
