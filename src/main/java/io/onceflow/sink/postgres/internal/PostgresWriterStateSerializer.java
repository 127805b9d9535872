package io.onceflow.sink.postgres.internal;

import io.onceflow.api.Event;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import org.apache.flink.annotation.Internal;
import org.apache.flink.core.io.SimpleVersionedSerializer;
import org.apache.flink.core.memory.DataInputDeserializer;
import org.apache.flink.core.memory.DataOutputSerializer;

/**
 * Internal. Writes a {@link PostgresWriterState} into checkpoints. Part of the savepoint format:
 * never change a version; add one and keep reading the old ones.
 *
 * <p>Version 1 was the stateless writer of onceflow 0.1, which never wrote an element (so there is
 * nothing of version 1 to read). Version 2 is the horizon as 8 bytes. Version 3 adds the deferred
 * events: their count (4 bytes), then each in {@link EventFormat}.
 */
@Internal
public final class PostgresWriterStateSerializer implements SimpleVersionedSerializer<PostgresWriterState> {
    public static final int VERSION = 3;
    private static final int HORIZON_ONLY = 2;

    @Override
    public int getVersion() {
        return VERSION;
    }

    @Override
    public byte[] serialize(PostgresWriterState state) throws IOException {
        DataOutputSerializer out = new DataOutputSerializer(12);
        out.writeLong(state.horizon());
        out.writeInt(state.deferredEvents().size());
        for (Event event : state.deferredEvents()) {
            EventFormat.write(event, out);
        }
        return out.getCopyOfBuffer();
    }

    @Override
    public PostgresWriterState deserialize(int version, byte[] serialized) throws IOException {
        if (version != VERSION && version != HORIZON_ONLY) {
            throw new IOException("cannot read a PostgreSQL sink writer state of serializer version " + version
                    + "; this build reads versions " + HORIZON_ONLY + " and " + VERSION + ". Was the checkpoint or"
                    + " savepoint written by a newer onceflow? Restore it with that version.");
        }
        DataInputDeserializer in = new DataInputDeserializer(serialized);
        long horizon = in.readLong();
        List<Event> events = new ArrayList<>();
        if (version == VERSION) {
            int count = in.readInt();
            for (int i = 0; i < count; i++) {
                events.add(EventFormat.read(in));
            }
        }
        if (in.available() > 0) {
            throw new IOException("corrupt PostgreSQL sink writer state: " + in.available() + " unexpected bytes");
        }
        return new PostgresWriterState(horizon, events);
    }
}
