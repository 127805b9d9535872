package io.onceflow.ingest;

import io.onceflow.api.Event;
import java.io.ByteArrayOutputStream;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.stream.Stream;
import org.apache.flink.util.InstantiationUtil;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;
import static io.onceflow.ingest.DeadLetterReason.EMPTY_ID;
import static io.onceflow.ingest.DeadLetterReason.ID_TOO_LONG;
import static io.onceflow.ingest.DeadLetterReason.NUMBER_OUT_OF_RANGE;
import static io.onceflow.ingest.DeadLetterReason.INVALID_ID_TYPE;
import static io.onceflow.ingest.DeadLetterReason.INVALID_UTF8;
import static io.onceflow.ingest.DeadLetterReason.MALFORMED_JSON;
import static io.onceflow.ingest.DeadLetterReason.MISSING_ID;
import static io.onceflow.ingest.DeadLetterReason.NOT_A_JSON_OBJECT;
import static io.onceflow.ingest.DeadLetterReason.NULL_VALUE;
import static io.onceflow.ingest.DeadLetterReason.PAYLOAD_TOO_LARGE;
import static io.onceflow.ingest.DeadLetterReason.UNSUPPORTED_CHARACTER;
import static io.onceflow.ingest.TestRecords.OFFSET;
import static io.onceflow.ingest.TestRecords.PARTITION;
import static io.onceflow.ingest.TestRecords.TIMESTAMP;
import static io.onceflow.ingest.TestRecords.TOPIC;
import static io.onceflow.ingest.TestRecords.ingest;
import static io.onceflow.ingest.TestRecords.record;
import static io.onceflow.ingest.TestRecords.utf8;
import static io.onceflow.ingest.TestRecords.value;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.params.provider.Arguments.arguments;


class IngestDeserializerTest {
    private static final int MAX_MESSAGE_BYTES = 256;
    private static final int MAX_ID_LENGTH = 16;

    private static final String HEADER = "header:message-id";
    private static final String POINTER = "json:/id";
    private static final String KEY = "key";

    // ---------------------------------------------------------------- id extraction

    @Test
    void takesTheIdFromTheHeaderAndKeepsEverythingElseAsReceived() {
        RecordHeaders headers = new RecordHeaders();
        headers.add("message-id", utf8("m-1"));
        headers.add("trace", utf8("t-1"));
        ConsumerRecord<byte[], byte[]> record = record(utf8("k"), utf8("{\"amount\":5}"), headers);

        Event event = accepted(HEADER, record);

        assertThat(event.messageId).isEqualTo("m-1");
        assertThat(event.payload).isSameAs(record.value()).isEqualTo(utf8("{\"amount\":5}"));
        assertThat(event.sourceTopic).isEqualTo(TOPIC);
        assertThat(event.sourcePartition).isEqualTo(PARTITION);
        assertThat(event.sourceOffset).isEqualTo(OFFSET);
        assertThat(event.sourceTimestamp).isEqualTo(TIMESTAMP);
        assertThat(event.headers).containsOnlyKeys("message-id", "trace");
        assertThat(event.headers.get("trace")).isEqualTo(utf8("t-1"));
        assertThat(event.sourceKey).as("the key of its dead letter, should the processor refuse it").isEqualTo(utf8("k"));
    }

    @Test
    void aRepeatedHeaderCountsWithItsLastValue() {
        RecordHeaders headers = new RecordHeaders();
        headers.add("message-id", utf8("first"));
        headers.add("other", null);
        headers.add("message-id", utf8("last"));

        Event event = accepted(HEADER, record(null, utf8("{}"), headers));

        assertThat(event.messageId).isEqualTo("last");
        assertThat(event.headers).containsOnlyKeys("message-id", "other");
        assertThat(event.headers.get("message-id")).isEqualTo(utf8("last"));
        assertThat(event.headers.get("other")).isNull();
    }

    @Test
    void usesTheIdExactlyAsFound() {
        assertThat(accepted(HEADER, withHeaderId(utf8(" Mixed-Case "))).messageId).isEqualTo(" Mixed-Case ");
        assertThat(accepted(POINTER, value("{\"id\":\"\\tÄb \"}")).messageId).isEqualTo("\tÄb ");
        assertThat(accepted(KEY, record(utf8(" k "), utf8("{}"))).messageId).isEqualTo(" k ");
    }

    @Test
    void takesTheIdFromATopLevelJsonMember() {
        ConsumerRecord<byte[], byte[]> record = value("{\"id\":\"p-1\",\"amount\":5}");

        Event event = accepted(POINTER, record);

        assertThat(event.messageId).isEqualTo("p-1");
        assertThat(event.payload).isSameAs(record.value());
    }

    @Test
    void takesTheIdFromANestedJsonMember() {
        assertThat(accepted("json:/payment/id", value("{\"id\":\"outer\",\"payment\":{\"id\":\"inner\"}}")).messageId)
                .isEqualTo("inner");
        assertThat(accepted("json:/items/1/id", value("{\"items\":[{\"id\":\"a\"},{\"id\":\"b\"}]}")).messageId)
                .isEqualTo("b");
    }

    @Test
    void decodesEscapesInTheJsonPointer() {
        ConsumerRecord<byte[], byte[]> record = value("{\"a/b\":{\"c~d\":\"escaped\"},\"a\":{\"b\":\"unescaped\"}}");

        assertThat(accepted("json:/a~1b/c~0d", record).messageId).isEqualTo("escaped");
    }

    @ParameterizedTest(name = "{0} -> {1}")
    @MethodSource
    void takesAnIntegralNumberAsItsDecimalText(String idJson, String expectedId) {
        IngestDeserializer deserializer =
                new IngestDeserializer(MessageIdSource.parse(POINTER), MAX_MESSAGE_BYTES, 64, Integer.MAX_VALUE);

        IngestResult result = ingest(deserializer, value("{\"id\":" + idJson + "}"));

        assertThat(result.event.messageId).isEqualTo(expectedId);
    }

    static Stream<Arguments> takesAnIntegralNumberAsItsDecimalText() {
        return Stream.of(
                arguments("42", "42"),
                arguments("-7", "-7"),
                arguments("9007199254740993", "9007199254740993"),
                arguments("123456789012345678901234567890", "123456789012345678901234567890"));
    }

    @Test
    void takesTheIdFromTheKey() {
        ConsumerRecord<byte[], byte[]> record = record(utf8("order-9"), utf8("{\"id\":\"ignored\"}"));

        Event event = accepted(KEY, record);

        assertThat(event.messageId).isEqualTo("order-9");
        assertThat(event.payload).isSameAs(record.value());
    }

    @Test
    void acceptsAValueOfExactlyTheMaximumSize() {
        String json = "{\"id\":\"a\",\"pad\":\"" + "x".repeat(MAX_MESSAGE_BYTES - 19) + "\"}";
        assertThat(utf8(json)).hasSize(MAX_MESSAGE_BYTES);

        assertThat(accepted(POINTER, value(json)).messageId).isEqualTo("a");
    }

    @Test
    void acceptsAnIdOfExactlyTheMaximumLength() {
        String id = "i".repeat(MAX_ID_LENGTH);

        assertThat(accepted(POINTER, value("{\"id\":\"" + id + "\"}")).messageId).isEqualTo(id);
    }

    @Test
    void reusedDecodingStateDoesNotLeakFromOneRecordIntoTheNext() {
        IngestDeserializer deserializer = deserializer(POINTER);
        String longId = "{\"pad\":\"" + "é".repeat(100) + "\",\"id\":\"long\"}";

        assertThat(ingest(deserializer, value(longId)).event.messageId).isEqualTo("long");
        assertThat(ingest(deserializer, record(null, new byte[] {'{', (byte) 0xC3})).deadLetter.reason)
                .isEqualTo("INVALID_UTF8");
        assertThat(ingest(deserializer, value("{\"id\":\"b\"}")).event.messageId).isEqualTo("b");
    }

    @Test
    void stillWorksAfterJavaSerialisationAsFlinkShipsItToTheTasks() throws Exception {
        IngestDeserializer copy = InstantiationUtil.clone(deserializer(POINTER));

        assertThat(ingest(copy, value("{\"id\":\"x\"}")).event.messageId).isEqualTo("x");
        assertThat(ingest(copy, value("[]")).deadLetter.reason).isEqualTo("NOT_A_JSON_OBJECT");
    }

    @Test
    void rejectsNonPositiveMaximums() {
        MessageIdSource source = MessageIdSource.DEFAULT;
        assertThatThrownBy(() -> new IngestDeserializer(source, 0, 10, 10)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new IngestDeserializer(source, 10, -1, 10)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new IngestDeserializer(source, 10, 10, 0)).isInstanceOf(IllegalArgumentException.class);
    }

    // ---------------------------------------------------------------- one test per dead-letter reason

    @Test
    void nullValue() {
        DeadLetter deadLetter = rejected(KEY, record(utf8("k-1"), null), NULL_VALUE);

        assertThat(deadLetter.errorMessage).contains("tombstone");
    }

    @Test
    void payloadTooLarge() {
        String json = "{\"id\":\"a\",\"pad\":\"" + "x".repeat(MAX_MESSAGE_BYTES - 18) + "\"}";

        DeadLetter deadLetter = rejected(POINTER, record(utf8("k"), utf8(json)), PAYLOAD_TOO_LARGE);

        assertThat(deadLetter.errorMessage)
                .contains((MAX_MESSAGE_BYTES + 1) + " bytes", "maximum of " + MAX_MESSAGE_BYTES);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource
    void invalidUtf8Value(String description, int[] badBytes) {
        byte[] value = concat(utf8("{\"id\":\""), badBytes, utf8("\"}"));

        DeadLetter deadLetter = rejected(POINTER, record(utf8("k"), value), INVALID_UTF8);

        assertThat(deadLetter.errorMessage).startsWith("the value is not valid UTF-8").contains("byte offset 7");
    }

    static Stream<Arguments> invalidUtf8Value() {
        return Stream.of(
                arguments("lone continuation byte", new int[] {0x80}),
                arguments("lead byte without continuation", new int[] {0xC3, 0x28}),
                arguments("overlong encoding of '/'", new int[] {0xC0, 0xAF}),
                arguments("UTF-16 surrogate encoded in UTF-8", new int[] {0xED, 0xA0, 0x80}),
                arguments("code point above U+10FFFF", new int[] {0xF4, 0x90, 0x80, 0x80}),
                arguments("invalid byte 0xFF", new int[] {0xFF}));
    }

    @Test
    void invalidUtf8ValueTruncatedAtTheEnd() {
        byte[] value = concat(utf8("{\"id\":\""), new int[] {0xE2, 0x82}, new byte[0]);

        DeadLetter deadLetter = rejected(POINTER, record(null, value), INVALID_UTF8);

        assertThat(deadLetter.errorMessage).contains("byte offset 7", "e2 82");
    }

    @Test
    void invalidUtf8HeaderId() {
        DeadLetter deadLetter = rejected(HEADER, withHeaderId(new byte[] {'a', (byte) 0xC3, 0x28}), INVALID_UTF8);

        assertThat(deadLetter.errorMessage).startsWith("the id in header 'message-id' is not valid UTF-8");
    }

    @Test
    void invalidUtf8KeyId() {
        DeadLetter deadLetter = rejected(KEY, record(new byte[] {(byte) 0xFE}, utf8("{}")), INVALID_UTF8);

        assertThat(deadLetter.errorMessage).startsWith("the id in the record key is not valid UTF-8");
    }

    @ParameterizedTest(name = "[{index}] {0}")
    @MethodSource
    void malformedJson(String json) {
        rejected(POINTER, record(utf8("k"), utf8(json)), MALFORMED_JSON);
    }

    static Stream<String> malformedJson() {
        return Stream.of(
                "{\"id\":\"a\"",
                "{\"id\":\"a\"} x",
                "{\"id\":\"a\"}{\"id\":\"b\"}",
                "{\"id\":\"a\"} 1",
                "{\"id\":\"a\"}]",
                "{id:\"a\"}",
                "{\"id\":'a'}",
                "{\"id\":\"a\",}",
                "{\"id\":NaN}",
                "/* comment */ {\"id\":\"a\"}",
                "{\"id\":\"a\u0001\"}",
                "",
                "  \n ");
    }

    @Test
    void malformedJsonSaysWhereAndWhy() {
        String garbage = rejected(POINTER, value("{\"id\":\"a\"} trailing"), MALFORMED_JSON)
                .errorMessage;
        String secondValue = rejected(POINTER, value("{\"id\":\"a\"}\n {}"), MALFORMED_JSON)
                .errorMessage;

        assertThat(garbage).startsWith("the value is not valid JSON: Unrecognized token 'trailing'")
                .endsWith("at line 1, column 12");
        assertThat(secondValue).isEqualTo("the value has content after its JSON value, at line 2, column 2");
    }

    @Test
    void jsonNestedTooDeeplyIsADeadLetterNotAStackOverflow() {
        // unclosed too: the parser stops at its depth limit before it could find that out
        String deep = "{\"id\":" + "[".repeat(100_000);
        IngestDeserializer deserializer =
                new IngestDeserializer(MessageIdSource.parse(POINTER), deep.length(), MAX_ID_LENGTH, Integer.MAX_VALUE);

        assertThat(ingest(deserializer, value(deep)).deadLetter.reason).isEqualTo("JSON_LIMIT_EXCEEDED");
    }

    static Stream<Arguments> validJsonBeyondAParserLimit() {
        String nested = "{\"id\":\"n\",\"a\":" + "[".repeat(1_000) + "]".repeat(1_000) + "}";
        String longNumber = "{\"id\":\"n\",\"a\":" + "7".repeat(1_001) + "}";
        String longName = "{\"id\":\"n\",\"" + "k".repeat(50_001) + "\":1}";
        JsonLimits defaults = JsonLimits.DEFAULTS;
        return Stream.of(
                Arguments.of(nested, "json.max.nesting.depth",
                        new JsonLimits(1_001, defaults.maxNumberLength(), defaults.maxNameLength(), defaults.maxStringLength())),
                Arguments.of(longNumber, "json.max.number.length",
                        new JsonLimits(defaults.maxNestingDepth(), 1_001, defaults.maxNameLength(), defaults.maxStringLength())),
                Arguments.of(longName, "json.max.name.length",
                        new JsonLimits(defaults.maxNestingDepth(), defaults.maxNumberLength(), 50_001, defaults.maxStringLength())));
    }

    /** PostgreSQL's jsonb stores all three; only the parser's limit stood in the way, and it is a setting. */
    @ParameterizedTest(name = "{1}")
    @MethodSource
    void validJsonBeyondAParserLimit(String json, String setting, JsonLimits raised) {
        IngestDeserializer withDefaults =
                new IngestDeserializer(MessageIdSource.parse(POINTER), 100_000, MAX_ID_LENGTH, Integer.MAX_VALUE);
        IngestDeserializer withTheLimitRaised = new IngestDeserializer(
                MessageIdSource.parse(POINTER), 100_000, MAX_ID_LENGTH, Integer.MAX_VALUE, raised);

        DeadLetter deadLetter = ingest(withDefaults, value(json)).deadLetter;
        assertThat(deadLetter.reason).isEqualTo("JSON_LIMIT_EXCEEDED");
        assertThat(deadLetter.errorMessage).contains("raise " + setting + " to accept it")
                .contains("exceeds the maximum allowed");
        assertThat(ingest(withTheLimitRaised, value(json)).event.messageId).isEqualTo("n");
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource
    void notAJsonObject(String json, String describedAs) {
        // The id is in a header, yet the value must still be an object: it is stored as jsonb.
        RecordHeaders headers = new RecordHeaders();
        headers.add("message-id", utf8("m-1"));

        DeadLetter deadLetter = rejected(HEADER, record(utf8("k"), utf8(json), headers), NOT_A_JSON_OBJECT);

        assertThat(deadLetter.errorMessage).contains(describedAs);
    }

    static Stream<Arguments> notAJsonObject() {
        return Stream.of(
                arguments("[{\"id\":\"a\"}]", "a JSON array"),
                arguments("\"a\"", "a JSON string"),
                arguments("42", "a JSON number"),
                arguments("1.5", "a non-integral JSON number"),
                arguments("true", "a JSON boolean"),
                arguments("null", "a JSON null"));
    }

    @Test
    void notAJsonObjectWhenTheIdIsTheKey() {
        rejected(KEY, record(utf8("k-1"), utf8("[]")), NOT_A_JSON_OBJECT);
    }

    @Test
    void missingIdHeader() {
        DeadLetter deadLetter = rejected(HEADER, record(utf8("k"), utf8("{\"id\":\"a\"}")), MISSING_ID);

        assertThat(deadLetter.errorMessage)
                .isEqualTo("the id in header 'message-id' is missing: the record has no such header");
    }

    @Test
    void missingIdHeaderWithANullValue() {
        DeadLetter deadLetter = rejected(HEADER, withHeaderId(null), MISSING_ID);

        assertThat(deadLetter.errorMessage).endsWith("the header has a null value");
    }

    @Test
    void missingIdAtThePointer() {
        DeadLetter deadLetter =
                rejected("json:/payment/id", value("{\"id\":\"a\",\"payment\":{}}"), MISSING_ID);

        assertThat(deadLetter.errorMessage).startsWith("the id at JSON pointer '/payment/id' is missing");
    }

    @Test
    void missingIdKey() {
        rejected(KEY, record(null, utf8("{\"id\":\"a\"}")), MISSING_ID);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource
    void emptyId(String description, String spec, ConsumerRecord<byte[], byte[]> record) {
        rejected(spec, record, EMPTY_ID);
    }

    static Stream<Arguments> emptyId() {
        return Stream.of(
                arguments("empty header", HEADER, withHeaderId(new byte[0])),
                arguments("blank header", HEADER, withHeaderId(utf8(" \t "))),
                arguments("empty JSON string", POINTER, value("{\"id\":\"\"}")),
                arguments("blank JSON string", POINTER, value("{\"id\":\" \\n \"}")),
                arguments("empty key", KEY, record(new byte[0], utf8("{}"))),
                arguments("blank key", KEY, record(utf8("  "), utf8("{}"))));
    }

    @Test
    void idTooLong() {
        String id = "i".repeat(MAX_ID_LENGTH + 1);

        DeadLetter deadLetter = rejected(POINTER, value("{\"id\":\"" + id + "\"}"), ID_TOO_LONG);

        assertThat(deadLetter.errorMessage).contains("17 chars", "maximum of 16", "'" + id + "'");
    }

    @Test
    void idTooLongCountsUtf16Chars() {
        // 9 characters outside the BMP are 18 UTF-16 chars: over the limit of 16.
        String id = "\uD83D\uDE00".repeat(9);

        rejected(HEADER, withHeaderId(utf8(id)), ID_TOO_LONG);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource
    void invalidIdType(String idJson, String describedAs, String quoted) {
        DeadLetter deadLetter =
                rejected(POINTER, record(utf8("k"), utf8("{\"id\":" + idJson + "}")), INVALID_ID_TYPE);

        assertThat(deadLetter.errorMessage).contains(describedAs, "'" + quoted + "'");
    }

    static Stream<Arguments> invalidIdType() {
        return Stream.of(
                arguments("{\"a\":1}", "a JSON object", "{\"a\":1}"),
                arguments("[\"a\"]", "a JSON array", "[\"a\"]"),
                arguments("true", "a JSON boolean", "true"),
                arguments("null", "a JSON null", "null"),
                arguments("1.5", "a non-integral JSON number", "1.5"),
                arguments("1e3", "a non-integral JSON number", "1000.0"));
    }

    // ---------------------------------------------------------------- order of checks and messages

    @ParameterizedTest(name = "{0}")
    @MethodSource
    void theFirstFailingCheckNamesTheReason(
            String description, String spec, ConsumerRecord<byte[], byte[]> record, DeadLetterReason expected) {
        rejected(spec, record, expected);
    }

    static Stream<Arguments> theFirstFailingCheckNamesTheReason() {
        byte[] tooLargeAndInvalid = new byte[MAX_MESSAGE_BYTES + 1];
        Arrays.fill(tooLargeAndInvalid, (byte) 0xFF);
        byte[] tooLongAndInvalid = new byte[MAX_ID_LENGTH + 1];
        Arrays.fill(tooLongAndInvalid, (byte) 0xFF);
        return Stream.of(
                arguments("null value before missing key", KEY, record(null, null), NULL_VALUE),
                arguments("size before UTF-8", KEY, record(utf8("k"), tooLargeAndInvalid), PAYLOAD_TOO_LARGE),
                arguments("UTF-8 before JSON", POINTER, record(null, new byte[] {(byte) 0xFF}), INVALID_UTF8),
                arguments("JSON syntax before the id", HEADER, value("{"), MALFORMED_JSON),
                arguments("object before the id", HEADER, value("[]"), NOT_A_JSON_OBJECT),
                arguments("id UTF-8 before length", KEY, record(tooLongAndInvalid, utf8("{}")), INVALID_UTF8),
                arguments("blank before too long", POINTER, value("{\"id\":\"" + " ".repeat(40) + "\"}"), EMPTY_ID));
    }

    @Test
    void messagesQuoteAtMostAHundredCharsOfInput() {
        IngestDeserializer deserializer =
                new IngestDeserializer(MessageIdSource.parse(POINTER), 100_000, MAX_ID_LENGTH, Integer.MAX_VALUE);

        String notAnObject = ingest(deserializer, value("\"" + "x".repeat(10_000) + "\"")).deadLetter.errorMessage;
        String malformed = ingest(deserializer, value("{\"id\": " + "y".repeat(10_000) + "}")).deadLetter.errorMessage;
        String tooLong = ingest(deserializer, value("{\"id\":\"" + "z".repeat(10_000) + "\"}")).deadLetter.errorMessage;

        assertThat(notAnObject).contains("x".repeat(99)).doesNotContain("x".repeat(101)).contains("10002 chars in all");
        assertThat(malformed).contains("y".repeat(50)).doesNotContain("y".repeat(101));
        assertThat(tooLong).contains("z".repeat(100)).doesNotContain("z".repeat(101));
        assertThat(notAnObject.length() + malformed.length() + tooLong.length()).isLessThan(3 * 300);
    }

    @Test
    void messagesEscapeControlCharacters() {
        String blank = rejected(HEADER, withHeaderId(utf8("\t\n ")), EMPTY_ID).errorMessage;
        byte[] controlChars = new byte[MAX_ID_LENGTH + 1];
        Arrays.fill(controlChars, (byte) 1);
        String controls = rejected(KEY, record(controlChars, utf8("{}")), ID_TOO_LONG).errorMessage;

        assertThat(blank).contains("'\\u0009\\u000a '").doesNotContainPattern("\\p{Cntrl}");
        assertThat(controls).contains("\\u0001".repeat(MAX_ID_LENGTH + 1)).doesNotContainPattern("\\p{Cntrl}");
    }

    // ---------------------------------------------------------------- helpers

    private static IngestDeserializer deserializer(String spec) {
        return new IngestDeserializer(MessageIdSource.parse(spec), MAX_MESSAGE_BYTES, MAX_ID_LENGTH, Integer.MAX_VALUE);
    }

    // ---------------------------------------------------------------- what PostgreSQL cannot store

    /** The limits were found by trying PostgreSQL 17's jsonb cast (see PostgresJsonLimits). */
    @ParameterizedTest
    @ValueSource(strings = {"1e999999", "1e-20000", "1e131072", "10e131071", "1.5e-16383", "0e-16384", "-1E+131072",
            "0.0e-16384"})
    void numbersOutsidePostgresNumericRangeAreDeadLettered(String number) {
        DeadLetter deadLetter = rejected(POINTER, value("{\"id\":\"n\",\"a\":[1,{\"x\":" + number + "}]}"),
                NUMBER_OUT_OF_RANGE);

        assertThat(deadLetter.errorMessage).contains("numeric range").contains("'" + number + "'");
    }

    @ParameterizedTest
    @ValueSource(strings = {"1e131071", "0.1e131072", "9e131071", "12e-16383", "1e-16382", "0e999999", "-0.5",
            "123456789012345678901234567890.000001", "1E+1000"})
    void numbersPostgresStoresAreAccepted(String number) {
        assertThat(accepted(POINTER, value("{\"id\":\"n\",\"x\":" + number + ",\"s\":\"1e999999\"}")).messageId)
                .isEqualTo("n");
    }

    @Test
    void idsOverTheByteLimitOfThePrimaryKeyAreDeadLetteredWhenConfigured() {
        IngestDeserializer withPostgres = new IngestDeserializer(MessageIdSource.parse(POINTER), 100_000, 4096,
                IngestDeserializer.POSTGRES_MAX_ID_BYTES);
        String fits = "\u20ac".repeat(IngestDeserializer.POSTGRES_MAX_ID_BYTES / 3); // 3 bytes each
        String tooLong = fits + "abc"; // 2049 bytes

        assertThat(ingest(withPostgres, value("{\"id\":\"" + fits + "\"}")).isAccepted()).isTrue();
        IngestResult rejected = ingest(withPostgres, value("{\"id\":\"" + tooLong + "\"}"));
        assertThat(rejected.deadLetter.reason).isEqualTo(ID_TOO_LONG.name());
        assertThat(rejected.deadLetter.errorMessage).contains("2049 bytes in UTF-8").contains("primary key");
        IngestDeserializer withoutPostgres =
                new IngestDeserializer(MessageIdSource.parse(POINTER), 100_000, 4096, Integer.MAX_VALUE);
        assertThat(ingest(withoutPostgres, value("{\"id\":\"" + tooLong + "\"}")).isAccepted())
                .as("no byte limit without the PostgreSQL sink").isTrue();
    }

    @ParameterizedTest
    @MethodSource
    void unsupportedCharacterInTheValue(String json) {
        DeadLetter deadLetter = rejected(POINTER, value(json), UNSUPPORTED_CHARACTER);

        assertThat(deadLetter.errorMessage).contains("PostgreSQL");
    }

    static Stream<String> unsupportedCharacterInTheValue() {
        return Stream.of(
                "{\"id\":\"a\",\"note\":\"x\\u0000y\"}",
                "{\"id\":\"a\",\"note\":\"\\ud83d\"}",
                "{\"id\":\"a\",\"note\":\"\\ud83dx\"}",
                "{\"id\":\"a\",\"note\":\"\\ud83d\\n\"}",
                "{\"id\":\"a\",\"note\":\"\\ude00\"}",
                "{\"id\":\"a\",\"note\":\"\\ud83d\\ud83d\"}",
                "{\"id\":\"a\\u0000\"}");
    }

    @ParameterizedTest
    @MethodSource
    void escapesPostgresCanStoreAreAccepted(String json) {
        assertThat(accepted(POINTER, value(json)).messageId).isEqualTo("a");
    }

    static Stream<String> escapesPostgresCanStoreAreAccepted() {
        return Stream.of(
                "{\"id\":\"a\",\"note\":\"\\ud83d\\ude00 \\u00e9 \\n\"}",
                "{\"id\":\"a\",\"note\":\"\\\\u0000 is an escaped backslash\"}",
                "{\"id\":\"a\",\"note\":\"\\\\\"}");
    }

    @Test
    void unsupportedCharacterInAHeaderId() {
        RecordHeaders headers = new RecordHeaders();
        headers.add("message-id", utf8("a\u0000b"));

        rejected(HEADER, record(null, utf8("{}"), headers), UNSUPPORTED_CHARACTER);
    }

    private static Event accepted(String spec, ConsumerRecord<byte[], byte[]> record) {
        IngestResult result = ingest(deserializer(spec), record);
        assertThat(result.deadLetter).as("dead letter").isNull();
        return result.event;
    }

    /**
     * Asserts that the record becomes a dead letter with the reason, the record's key and value
     * arrays unmodified, its source coordinates and headers, and a message.
     */
    private static DeadLetter rejected(String spec, ConsumerRecord<byte[], byte[]> record, DeadLetterReason reason) {
        byte[] keyBefore = record.key() == null ? null : record.key().clone();
        byte[] valueBefore = record.value() == null ? null : record.value().clone();

        IngestResult result = ingest(deserializer(spec), record);

        assertThat(result.event).as("event").isNull();
        DeadLetter deadLetter = result.deadLetter;
        assertThat(deadLetter.reason).as("reason; message: %s", deadLetter.errorMessage).isEqualTo(reason.name());
        assertThat(deadLetter.key).isSameAs(record.key()).isEqualTo(keyBefore);
        assertThat(deadLetter.value).isSameAs(record.value()).isEqualTo(valueBefore);
        assertThat(deadLetter.sourceTopic).isEqualTo(TOPIC);
        assertThat(deadLetter.sourcePartition).isEqualTo(PARTITION);
        assertThat(deadLetter.sourceOffset).isEqualTo(OFFSET);
        assertThat(deadLetter.sourceTimestamp).isEqualTo(TIMESTAMP);
        Map<String, byte[]> lastHeaderValues = new HashMap<>();
        record.headers().forEach(header -> lastHeaderValues.put(header.key(), header.value()));
        assertThat(deadLetter.headers).isEqualTo(lastHeaderValues);
        assertThat(deadLetter.errorMessage).isNotBlank();
        return deadLetter;
    }

    private static ConsumerRecord<byte[], byte[]> withHeaderId(byte[] id) {
        RecordHeaders headers = new RecordHeaders();
        headers.add("message-id", id);
        return record(utf8("k"), utf8("{\"id\":\"from-json\"}"), headers);
    }

    private static byte[] concat(byte[] prefix, int[] raw, byte[] suffix) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        out.writeBytes(prefix);
        for (int b : raw) {
            out.write(b);
        }
        out.writeBytes(suffix);
        return out.toByteArray();
    }
}
