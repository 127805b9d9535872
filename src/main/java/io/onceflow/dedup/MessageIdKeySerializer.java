package io.onceflow.dedup;

import java.io.IOException;
import org.apache.flink.api.common.typeutils.SimpleTypeSerializerSnapshot;
import org.apache.flink.api.common.typeutils.TypeSerializerSnapshot;
import org.apache.flink.api.common.typeutils.base.TypeSerializerSingleton;
import org.apache.flink.core.memory.DataInputView;
import org.apache.flink.core.memory.DataOutputView;
import org.apache.flink.types.StringValue;

/**
 * Serialises a {@link MessageIdKey} as one tag byte and then either the UUID's two longs (17 bytes
 * in all) or the id string in Flink's {@link StringValue} encoding. Part of the savepoint format:
 * keyed state (in RocksDB, the key bytes themselves) is stored under this form.
 */
public final class MessageIdKeySerializer extends TypeSerializerSingleton<MessageIdKey> {
    public static final MessageIdKeySerializer INSTANCE = new MessageIdKeySerializer();

    private static final long serialVersionUID = 1L;
    private static final byte UUID_TAG = 0;
    private static final byte TEXT_TAG = 1;

    @Override
    public boolean isImmutableType() {
        return true;
    }

    @Override
    public MessageIdKey createInstance() {
        return MessageIdKey.ofText("");
    }

    @Override
    public MessageIdKey copy(MessageIdKey from) {
        return from;
    }

    @Override
    public MessageIdKey copy(MessageIdKey from, MessageIdKey reuse) {
        return from;
    }

    @Override
    public int getLength() {
        return -1;
    }

    @Override
    public void serialize(MessageIdKey key, DataOutputView target) throws IOException {
        if (key.isUuid()) {
            target.writeByte(UUID_TAG);
            target.writeLong(key.uuidHigh());
            target.writeLong(key.uuidLow());
        } else {
            target.writeByte(TEXT_TAG);
            StringValue.writeString(key.text(), target);
        }
    }

    @Override
    public MessageIdKey deserialize(DataInputView source) throws IOException {
        byte tag = source.readByte();
        switch (tag) {
            case UUID_TAG:
                return MessageIdKey.ofUuid(source.readLong(), source.readLong());
            case TEXT_TAG:
                return MessageIdKey.ofText(StringValue.readString(source));
            default:
                throw new IOException("not a serialised message id key: tag " + tag);
        }
    }

    @Override
    public MessageIdKey deserialize(MessageIdKey reuse, DataInputView source) throws IOException {
        return deserialize(source);
    }

    @Override
    public void copy(DataInputView source, DataOutputView target) throws IOException {
        serialize(deserialize(source), target);
    }

    @Override
    public TypeSerializerSnapshot<MessageIdKey> snapshotConfiguration() {
        return new Snapshot();
    }

    /** The serializer's snapshot in savepoints; it has no configuration. */
    public static final class Snapshot extends SimpleTypeSerializerSnapshot<MessageIdKey> {
        public Snapshot() {
            super(() -> INSTANCE);
        }
    }
}
