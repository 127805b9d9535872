package io.onceflow.dedup;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.UUID;
import org.apache.flink.core.memory.DataInputDeserializer;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.junit.jupiter.api.Test;

class MessageIdKeyTest {
    private static final String UUID_ID = "0f8e6c2a-3b1d-4e5f-9a7b-c6d5e4f3a2b1";

    @Test
    void aCanonicalUuidBecomesSixteenBytesAndPrintsBackUnchanged() {
        SplittableRandom random = new SplittableRandom(7);
        for (int i = 0; i < 10_000; i++) {
            String id = new UUID(random.nextLong(), random.nextLong()).toString();
            MessageIdKey key = MessageIdKey.of(id);
            assertThat(key.isUuid()).as(id).isTrue();
            assertThat(key.messageId()).isEqualTo(id);
        }
        for (String edge : List.of("00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff")) {
            assertThat(MessageIdKey.of(edge).isUuid()).isTrue();
            assertThat(MessageIdKey.of(edge).messageId()).isEqualTo(edge);
        }
    }

    @Test
    void everyOtherIdStaysTheStringItself() {
        List<String> notCanonical = List.of(
                UUID_ID.toUpperCase(Locale.ROOT), // UUID.fromString accepts it; toString would not give it back
                "{" + UUID_ID + "}",
                UUID_ID.replace("-", ""),
                "f8e6c2a-3b1d-4e5f-9a7b-c6d5e4f3a2b1-", // right length, hyphens in the wrong places
                "1-2-3-4-5",
                "0f8e6c2a-3b1d-4e5f-9a7b-c6d5e4f3a2bg",
                "order-42",
                "");
        for (String id : notCanonical) {
            MessageIdKey key = MessageIdKey.of(id);
            assertThat(key.isUuid()).as(id).isFalse();
            assertThat(key.messageId()).isEqualTo(id);
        }
    }

    @Test
    void distinctIdsNeverShareAKey() {
        List<String> ids = List.of(UUID_ID, UUID_ID.toUpperCase(Locale.ROOT), "{" + UUID_ID + "}",
                UUID_ID.replace("-", ""), "00000000-0000-0000-0000-000000000000", "");
        Set<MessageIdKey> keys = new HashSet<>();
        for (String id : ids) {
            keys.add(MessageIdKey.of(id));
        }
        assertThat(keys).hasSameSizeAs(ids);
        assertThat(MessageIdKey.of(UUID_ID)).isNotEqualTo(MessageIdKey.of(UUID_ID.toUpperCase(Locale.ROOT)));
        assertThat(MessageIdKey.of(UUID_ID)).isEqualTo(MessageIdKey.of(new String(UUID_ID)))
                .hasSameHashCodeAs(MessageIdKey.of(UUID_ID));
    }

    @Test
    void theSerializerRoundTripsBothFormsAndAUuidTakesSeventeenBytes() throws IOException {
        for (String id : List.of(UUID_ID, UUID_ID.toUpperCase(Locale.ROOT), "order-42", "", "ünïcødé-\uD83D\uDE00")) {
            MessageIdKey key = MessageIdKey.of(id);
            DataOutputSerializer out = new DataOutputSerializer(64);
            MessageIdKeySerializer.INSTANCE.serialize(key, out);
            if (key.isUuid()) {
                assertThat(out.length()).isEqualTo(17);
            }
            MessageIdKey read = MessageIdKeySerializer.INSTANCE.deserialize(
                    new DataInputDeserializer(out.getSharedBuffer(), 0, out.length()));
            assertThat(read).isEqualTo(key);
            assertThat(read.messageId()).isEqualTo(id);
        }
    }

    @Test
    void theSerializerSnapshotRestoresTheSameSerializer() {
        assertThat(MessageIdKeySerializer.INSTANCE.snapshotConfiguration().restoreSerializer())
                .isSameAs(MessageIdKeySerializer.INSTANCE);
    }
}
