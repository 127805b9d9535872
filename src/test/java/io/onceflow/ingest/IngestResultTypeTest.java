package io.onceflow.ingest;

import io.onceflow.api.Event;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.flink.api.common.serialization.SerializerConfigImpl;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeutils.CompositeType;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.java.typeutils.GenericTypeInfo;
import org.apache.flink.api.java.typeutils.ListTypeInfo;
import org.apache.flink.api.java.typeutils.MapTypeInfo;
import org.apache.flink.api.java.typeutils.ObjectArrayTypeInfo;
import org.apache.flink.api.java.typeutils.PojoTypeInfo;
import org.apache.flink.core.memory.DataInputDeserializer;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.junit.jupiter.api.Test;
import static io.onceflow.ingest.TestRecords.utf8;
import static org.assertj.core.api.Assertions.assertThat;


/** The produced type must be serialised by Flink's own serialisers, never by Kryo. */
class IngestResultTypeTest {
    private final TypeInformation<IngestResult> producedType =
            new IngestDeserializer(MessageIdSource.DEFAULT, 1024, 64, Integer.MAX_VALUE).getProducedType();

    @Test
    void isAPojoOfPojos() {
        assertThat(producedType).isEqualTo(TypeInformation.of(IngestResult.class));
        assertThat(producedType).isInstanceOf(PojoTypeInfo.class);
        PojoTypeInfo<IngestResult> pojo = (PojoTypeInfo<IngestResult>) producedType;
        assertThat(pojo.getTypeAt("event")).isInstanceOf(PojoTypeInfo.class);
        assertThat(pojo.getTypeAt("deadLetter")).isInstanceOf(PojoTypeInfo.class);
        assertThat(((PojoTypeInfo<?>) pojo.getTypeAt("event")).getTypeAt("headers")).isInstanceOf(MapTypeInfo.class);
    }

    @Test
    void hasNoGenericTypeAnywhere() {
        List<String> genericPaths = new ArrayList<>();
        collectGenericTypes("IngestResult", producedType, genericPaths);

        assertThat(genericPaths).isEmpty();
    }

    @Test
    void theWalkFindsAGenericTypeNestedInAMap() {
        List<String> genericPaths = new ArrayList<>();
        collectGenericTypes("WithGenericMapValue", TypeInformation.of(WithGenericMapValue.class), genericPaths);

        assertThat(genericPaths)
                .singleElement()
                .asString()
                .startsWith("WithGenericMapValue.values<value>: GenericType");
    }

    /** A POJO whose map values Flink can only serialise with Kryo. */
    public static class WithGenericMapValue {
        public Map<String, Object> values;
    }

    @Test
    void roundTripsWithGenericTypesDisabled() throws Exception {
        SerializerConfigImpl config = new SerializerConfigImpl();
        config.setGenericTypes(false); // Kryo anywhere in the tree would now throw
        TypeSerializer<IngestResult> serializer = producedType.createSerializer(config);
        Map<String, byte[]> headers = new HashMap<>();
        headers.put("message-id", utf8("m-1"));
        headers.put("no-value", null);
        Event event = new Event("m-1", utf8("{}"), "t", 1, 2L, 3L, headers);
        event.sourceKey = utf8("account-7");
        IngestResult accepted = IngestResult.accepted(event);
        IngestResult rejected = IngestResult.rejected(
                new DeadLetter(null, null, DeadLetterReason.NULL_VALUE, "null", "t", 1, 2L, 3L, new HashMap<>()));

        IngestResult acceptedCopy = roundTrip(serializer, accepted);
        IngestResult rejectedCopy = roundTrip(serializer, rejected);

        assertThat(acceptedCopy.event).isEqualTo(accepted.event);
        assertThat(acceptedCopy.deadLetter).isNull();
        assertThat(acceptedCopy.event.headers).containsOnlyKeys("message-id", "no-value");
        assertThat(acceptedCopy.event.headers.get("message-id")).isEqualTo(utf8("m-1"));
        assertThat(acceptedCopy.event.sourceKey).isEqualTo(utf8("account-7"));
        assertThat(rejectedCopy.event).isNull();
        assertThat(rejectedCopy.deadLetter.reason).isEqualTo("NULL_VALUE");
        assertThat(rejectedCopy.deadLetter.value).isNull();
    }

    private static IngestResult roundTrip(TypeSerializer<IngestResult> serializer, IngestResult result)
            throws Exception {
        DataOutputSerializer out = new DataOutputSerializer(256);
        serializer.serialize(result, out);
        return serializer.deserialize(new DataInputDeserializer(out.getCopyOfBuffer()));
    }

    /** Walks the type tree, collecting the path of every generic (Kryo-serialised) type. */
    private static void collectGenericTypes(String path, TypeInformation<?> type, List<String> genericPaths) {
        if (type instanceof GenericTypeInfo) {
            genericPaths.add(path + ": " + type);
        } else if (type instanceof CompositeType) {
            CompositeType<?> composite = (CompositeType<?>) type;
            for (String field : composite.getFieldNames()) {
                collectGenericTypes(path + "." + field, composite.getTypeAt(field), genericPaths);
            }
        } else if (type instanceof MapTypeInfo) {
            MapTypeInfo<?, ?> map = (MapTypeInfo<?, ?>) type;
            collectGenericTypes(path + "<key>", map.getKeyTypeInfo(), genericPaths);
            collectGenericTypes(path + "<value>", map.getValueTypeInfo(), genericPaths);
        } else if (type instanceof ListTypeInfo) {
            collectGenericTypes(path + "<element>", ((ListTypeInfo<?>) type).getElementTypeInfo(), genericPaths);
        } else if (type instanceof ObjectArrayTypeInfo) {
            collectGenericTypes(path + "[]", ((ObjectArrayTypeInfo<?, ?>) type).getComponentInfo(), genericPaths);
        }
    }
}
