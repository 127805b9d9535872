package io.onceflow.ingest;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.onceflow.api.Event;
import java.io.ByteArrayOutputStream;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.HexFormat;
import java.util.Random;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.junit.jupiter.api.Test;
import static io.onceflow.ingest.TestRecords.ingest;
import static io.onceflow.ingest.TestRecords.record;
import static io.onceflow.ingest.TestRecords.utf8;
import static org.assertj.core.api.Assertions.assertThat;


/**
 * Feeds thousands of seeded random records (random bytes, random JSON-like text, mutations of valid
 * JSON) through the deserializer: each must become exactly one result, never an exception.
 */
class IngestDeserializerFuzzTest {
    private static final long SEED = 20_261_129L;
    private static final int INPUTS = 6_000;
    private static final int MAX_MESSAGE_BYTES = 48;
    private static final int MAX_ID_LENGTH = 8;
    private static final String[] SPECS = {"header:message-id", "json:/id", "json:/a/0/b", "key"};
    private static final String JSON_ALPHABET = "{}[]\":,.-+0123456789eEtrufalsnidab \t\n\\/\u00e9";
    private static final String[] VALID_VALUES = {
        "{\"id\":\"a-1\",\"n\":1}",
        "{\"id\":17,\"a\":[{\"b\":\"x\"}]}",
        "{\"a\":[{\"b\":-3}],\"id\":\"\u00e9\u20ac\"}",
        "{\"id\":\" \",\"a\":[{\"b\":true}]}",
        "{\"id\":\"b-2\",\"s\":\"\\ud83d\\ude00\\u0000\"}",
        "{\"id\":\"c\",\"x\":-1.5e999999}",
        "{\"id\":\"d\",\"a\":[[[[[[1]]]]]]}",
    };
    /** Shallow enough for the deep valid value above (and some mutations) to pass it. */
    private static final JsonLimits LIMITS = new JsonLimits(5, JsonLimits.DEFAULTS.maxNumberLength(),
            JsonLimits.DEFAULTS.maxNameLength(), JsonLimits.DEFAULTS.maxStringLength());
    /** An independent judge of "is one JSON object": Jackson's byte parser, not the char one we use. */
    private static final ObjectMapper ORACLE =
            new ObjectMapper().enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS);

    private final Random random = new Random(SEED);

    @Test
    void everyRecordBecomesExactlyOneWellFormedResult() {
        int accepted = 0;
        Set<DeadLetterReason> reasonsSeen = EnumSet.noneOf(DeadLetterReason.class);
        for (int i = 0; i < INPUTS; i++) {
            String spec = SPECS[random.nextInt(SPECS.length)];
            ConsumerRecord<byte[], byte[]> record = randomRecord(i);
            try {
                IngestResult result = ingest(
                        new IngestDeserializer(
                                MessageIdSource.parse(spec), MAX_MESSAGE_BYTES, MAX_ID_LENGTH, Integer.MAX_VALUE,
                                LIMITS),
                        record);
                if (result.isAccepted()) {
                    checkAccepted(result.event, record);
                    accepted++;
                } else {
                    reasonsSeen.add(checkRejected(result.deadLetter, record));
                }
            } catch (Exception | AssertionError e) {
                throw new AssertionError("input #" + i + " with id source " + spec + ", key " + hex(record.key())
                        + ", value " + hex(record.value()), e);
            }
        }
        // Guards against a vacuous fuzz: the inputs must reach every outcome.
        assertThat(accepted).isGreaterThan(INPUTS / 100);
        assertThat(reasonsSeen).containsExactlyInAnyOrderElementsOf(
                Arrays.stream(DeadLetterReason.values()).filter(reason -> !reason.fromProcessor()).toList());
    }

    private static void checkAccepted(Event event, ConsumerRecord<byte[], byte[]> record) throws Exception {
        assertThat(event.payload).isSameAs(record.value());
        assertThat(ORACLE.readTree(event.payload).isObject()).as("payload is one JSON object").isTrue();
        assertThat(event.messageId).isNotBlank().hasSizeLessThanOrEqualTo(MAX_ID_LENGTH);
    }

    private static DeadLetterReason checkRejected(DeadLetter deadLetter, ConsumerRecord<byte[], byte[]> record) {
        assertThat(deadLetter.key).isSameAs(record.key());
        assertThat(deadLetter.value).isSameAs(record.value());
        assertThat(deadLetter.errorMessage).isNotBlank().doesNotContainPattern("\\p{Cntrl}");
        return DeadLetterReason.valueOf(deadLetter.reason);
    }

    private ConsumerRecord<byte[], byte[]> randomRecord(int i) {
        byte[] value = random.nextInt(50) == 0 ? null : switch (i % 3) {
            case 0 -> randomBytes(64);
            case 1 -> utf8(randomJsonLikeText());
            default -> mutate(utf8(VALID_VALUES[random.nextInt(VALID_VALUES.length)]));
        };
        RecordHeaders headers = new RecordHeaders();
        if (random.nextBoolean()) {
            headers.add("message-id", randomId());
        }
        return record(random.nextInt(4) == 0 ? null : randomId(), value, headers);
    }

    /** Mostly short ASCII ids, some empty, some longer than the maximum, some arbitrary bytes. */
    private byte[] randomId() {
        return switch (random.nextInt(4)) {
            case 0 -> randomBytes(MAX_ID_LENGTH + 4);
            case 1 -> new byte[0];
            default -> utf8("id-" + random.nextInt(1 << random.nextInt(30)));
        };
    }

    private byte[] randomBytes(int maxLength) {
        byte[] bytes = new byte[random.nextInt(maxLength + 1)];
        random.nextBytes(bytes);
        return bytes;
    }

    private String randomJsonLikeText() {
        StringBuilder text = new StringBuilder();
        int length = random.nextInt(40);
        for (int j = 0; j < length; j++) {
            text.append(JSON_ALPHABET.charAt(random.nextInt(JSON_ALPHABET.length())));
        }
        return text.toString();
    }

    /** Applies up to two random byte edits: overwrite, delete or insert. */
    private byte[] mutate(byte[] valid) {
        byte[] bytes = valid;
        for (int edits = random.nextInt(3); edits > 0; edits--) {
            int at = random.nextInt(bytes.length);
            ByteArrayOutputStream edited = new ByteArrayOutputStream();
            edited.write(bytes, 0, at);
            switch (random.nextInt(3)) {
                case 0 -> edited.write(random.nextInt(256));
                case 1 -> { } // delete the byte at `at`
                default -> {
                    edited.write(JSON_ALPHABET.charAt(random.nextInt(JSON_ALPHABET.length())));
                    edited.write(bytes[at]);
                }
            }
            edited.write(bytes, at + 1, bytes.length - at - 1);
            bytes = edited.toByteArray();
        }
        return bytes;
    }

    private static String hex(byte[] bytes) {
        return bytes == null ? "null" : HexFormat.of().formatHex(bytes);
    }
}
