package io.onceflow.sink.postgres.internal.commit;

import java.io.IOException;
import org.apache.flink.annotation.Internal;
import org.apache.flink.core.io.SimpleVersionedSerializer;
import org.apache.flink.core.memory.DataInputDeserializer;
import org.apache.flink.core.memory.DataOutputSerializer;

/**
 * Internal. Writes a {@link PostgresWriterState} into checkpoints. Part of the savepoint format:
 * never change a version; add one and keep reading the old ones.
 *
 * <p>Version 1 was the stateless writer of onceflow 0.1, which never wrote an element (so there is
 * nothing of version 1 to read). Version 2 is the horizon as 8 bytes.
 */
@Internal
public final class PostgresWriterStateSerializer implements SimpleVersionedSerializer<PostgresWriterState> {
    public static final int VERSION = 2;

    @Override
    public int getVersion() {
        return VERSION;
    }

    @Override
    public byte[] serialize(PostgresWriterState state) {
        DataOutputSerializer out = new DataOutputSerializer(8);
        try {
            out.writeLong(state.horizon());
        } catch (IOException impossible) { // in-memory output
            throw new IllegalStateException(impossible);
        }
        return out.getCopyOfBuffer();
    }

    @Override
    public PostgresWriterState deserialize(int version, byte[] serialized) throws IOException {
        if (version != VERSION) {
            throw new IOException("cannot read a PostgreSQL sink writer state of serializer version " + version
                    + "; this build reads version " + VERSION + ". Was the checkpoint or savepoint written by a"
                    + " newer onceflow? Restore it with that version.");
        }
        DataInputDeserializer in = new DataInputDeserializer(serialized);
        long horizon = in.readLong();
        if (in.available() > 0) {
            throw new IOException("corrupt PostgreSQL sink writer state: " + in.available() + " unexpected bytes");
        }
        return new PostgresWriterState(horizon);
    }
}
