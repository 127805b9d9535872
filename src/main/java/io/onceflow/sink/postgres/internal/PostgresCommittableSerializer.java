package io.onceflow.sink.postgres.internal;

import java.io.IOException;
import org.apache.flink.annotation.Internal;
import org.apache.flink.core.io.SimpleVersionedSerializer;
import org.apache.flink.core.memory.DataInputDeserializer;
import org.apache.flink.core.memory.DataOutputSerializer;

/**
 * Internal. Writes a {@link PostgresCommittable} into checkpoints. Part of the savepoint format:
 * never change version 1; add a version and keep reading the old ones.
 *
 * <p>Version 1 is the gid as a UTF string: the exact text that {@code COMMIT PREPARED} needs.
 */
@Internal
public final class PostgresCommittableSerializer implements SimpleVersionedSerializer<PostgresCommittable> {
    public static final int VERSION = 1;

    @Override
    public int getVersion() {
        return VERSION;
    }

    @Override
    public byte[] serialize(PostgresCommittable committable) throws IOException {
        DataOutputSerializer out = new DataOutputSerializer(128);
        out.writeUTF(committable.transactionId().encode());
        return out.getCopyOfBuffer();
    }

    @Override
    public PostgresCommittable deserialize(int version, byte[] serialized) throws IOException {
        if (version != VERSION) {
            throw new IOException("cannot read a PostgreSQL sink committable of serializer version " + version
                    + "; this build reads version " + VERSION + ". Was the checkpoint or savepoint written by a"
                    + " newer onceflow? Restore it with that version, or commit its prepared transactions by hand.");
        }
        DataInputDeserializer in = new DataInputDeserializer(serialized);
        String gid = in.readUTF();
        if (in.available() > 0) {
            throw new IOException("corrupt PostgreSQL sink committable: " + in.available()
                    + " unexpected bytes after gid " + gid);
        }
        return new PostgresCommittable(TransactionId.parse(gid).orElseThrow(() ->
                new IOException("corrupt PostgreSQL sink committable: '" + gid + "' is not a onceflow gid")));
    }
}
