package io.onceflow.dedup;

import org.apache.flink.api.common.serialization.SerializerConfig;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeutils.TypeSerializer;

/** The declared type of {@link MessageIdKey}, so that Flink uses {@link MessageIdKeySerializer} (never Kryo). */
public final class MessageIdKeyTypeInfo extends TypeInformation<MessageIdKey> {
    public static final MessageIdKeyTypeInfo INSTANCE = new MessageIdKeyTypeInfo();

    private static final long serialVersionUID = 1L;

    private MessageIdKeyTypeInfo() {}

    @Override
    public boolean isBasicType() {
        return false;
    }

    @Override
    public boolean isTupleType() {
        return false;
    }

    @Override
    public int getArity() {
        return 1;
    }

    @Override
    public int getTotalFields() {
        return 1;
    }

    @Override
    public Class<MessageIdKey> getTypeClass() {
        return MessageIdKey.class;
    }

    @Override
    public boolean isKeyType() {
        return true;
    }

    @Override
    public TypeSerializer<MessageIdKey> createSerializer(SerializerConfig config) {
        return MessageIdKeySerializer.INSTANCE;
    }

    @Override
    public String toString() {
        return "MessageIdKey";
    }

    @Override
    public boolean equals(Object obj) {
        return obj instanceof MessageIdKeyTypeInfo;
    }

    @Override
    public int hashCode() {
        return MessageIdKeyTypeInfo.class.hashCode();
    }

    @Override
    public boolean canEqual(Object obj) {
        return obj instanceof MessageIdKeyTypeInfo;
    }

    /** A singleton: deserialisation (Flink ships type information to the tasks) must not create a second one. */
    private Object readResolve() {
        return INSTANCE;
    }
}
