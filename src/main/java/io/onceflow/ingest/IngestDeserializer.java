package io.onceflow.ingest;

import com.fasterxml.jackson.databind.JsonNode;
import io.onceflow.api.Event;
import java.nio.CharBuffer;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;

/**
 * Turns each Kafka record into exactly one {@link IngestResult}: an accepted {@link Event}, or a
 * {@link DeadLetter} that keeps the key and value bytes as received and says why.
 *
 * <p>{@link #deserialize} never throws, whatever the record holds: one bad record must not fail
 * the job and, after the restart, fail it again. The checks, in order (the first failing one
 * names the {@link DeadLetterReason}):
 *
 * <ol>
 *   <li>{@code NULL_VALUE}: the value is null (a tombstone);
 *   <li>{@code PAYLOAD_TOO_LARGE}: the value has more than {@code maxMessageBytes} bytes;
 *   <li>{@code INVALID_UTF8}: the value is not valid UTF-8;
 *   <li>{@code MALFORMED_JSON}: the value is not exactly one JSON value (trailing content counts),
 *       or {@code JSON_LIMIT_EXCEEDED}: it is valid JSON beyond a limit of the parser
 *       ({@link JsonLimits});
 *   <li>{@code NOT_A_JSON_OBJECT}: the value is JSON but not an object. Checked whatever the id
 *       source, since the payload is later stored as jsonb;
 *   <li>{@code UNSUPPORTED_CHARACTER}: the value escapes U+0000 or an unpaired surrogate, and
 *       {@code NUMBER_OUT_OF_RANGE}: it holds a number outside numeric's range; jsonb rejects both
 *       ({@link PostgresJsonLimits});
 *   <li>{@code MISSING_ID}: the header is absent or has a null value, the pointer matches nothing,
 *       or the key is null;
 *   <li>{@code INVALID_UTF8}: a header or key id is not valid UTF-8, or {@code INVALID_ID_TYPE}: the
 *       pointer matches something other than a string or an integral number (which becomes its
 *       decimal text);
 *   <li>{@code EMPTY_ID}: the id is empty or only white space;
 *   <li>{@code UNSUPPORTED_CHARACTER}: the id holds U+0000, which PostgreSQL text rejects;
 *   <li>{@code ID_TOO_LONG}: the id has more than {@code maxIdLength} chars (UTF-16 units, so a
 *       supplementary character counts twice and the limit never undercounts a database's), or more
 *       than {@code maxIdBytes} bytes in UTF-8 (with the PostgreSQL sink:
 *       {@link #POSTGRES_MAX_ID_BYTES}).
 * </ol>
 *
 * <p>An accepted id is used exactly as found, without trimming. Each record's headers become a map
 * holding the last value of each header key.
 *
 * <p>Flink gives each source reader its own copy of this schema; one copy is not thread-safe.
 */
public class IngestDeserializer implements KafkaRecordDeserializationSchema<IngestResult> {
    private static final long serialVersionUID = 1L;


    private static final String VALUE_SUBJECT = "the value";

    /**
     * The longest id, in UTF-8 bytes, that the PostgreSQL sink's primary key can index: a btree
     * index row holds at most 2704 bytes on 8 KB pages, and PostgreSQL 17 refused incompressible
     * ids from 2700 bytes on ("index row size 2712 exceeds btree version 4 maximum 2704"). 2048
     * leaves room for the tuple header and another index on the id.
     */
    public static final int POSTGRES_MAX_ID_BYTES = 2048;

    private final MessageIdSource idSource;
    private final int maxMessageBytes;
    private final int maxIdLength;
    private final int maxIdBytes;
    private final JsonValueParser json;

    /** Created on first use, as it is not serialisable and Flink ships this schema to the tasks. */
    private transient StrictUtf8Decoder utf8;

    /**
     * @param idSource where each record's message id is found
     * @param maxMessageBytes the largest accepted value, in bytes
     * @param maxIdLength the longest accepted id, in UTF-16 chars
     * @param maxIdBytes the longest accepted id, in UTF-8 bytes ({@link #POSTGRES_MAX_ID_BYTES} when
     *     a PostgreSQL sink stores the ids, {@code Integer.MAX_VALUE} otherwise)
     * @throws IllegalArgumentException if a maximum is not positive
     */
    public IngestDeserializer(MessageIdSource idSource, int maxMessageBytes, int maxIdLength, int maxIdBytes) {
        this(idSource, maxMessageBytes, maxIdLength, maxIdBytes, JsonLimits.DEFAULTS);
    }

    /**
     * As {@link #IngestDeserializer(MessageIdSource, int, int, int)}, with the parser's limits.
     *
     * @param jsonLimits the JSON parser's limits; a value beyond one is {@code JSON_LIMIT_EXCEEDED}
     */
    public IngestDeserializer(MessageIdSource idSource, int maxMessageBytes, int maxIdLength, int maxIdBytes,
            JsonLimits jsonLimits) {
        if (maxMessageBytes <= 0 || maxIdLength <= 0 || maxIdBytes <= 0) {
            throw new IllegalArgumentException("maxMessageBytes, maxIdLength and maxIdBytes must be positive, got "
                    + maxMessageBytes + ", " + maxIdLength + " and " + maxIdBytes);
        }
        this.idSource = Objects.requireNonNull(idSource, "idSource");
        this.maxMessageBytes = maxMessageBytes;
        this.maxIdLength = maxIdLength;
        this.maxIdBytes = maxIdBytes;
        this.json = new JsonValueParser(Objects.requireNonNull(jsonLimits, "jsonLimits"));
    }

    /** Emits exactly one {@link IngestResult} for the record; never throws. */
    @Override
    public void deserialize(ConsumerRecord<byte[], byte[]> record, Collector<IngestResult> out) {
        out.collect(ingest(record));
    }

    /** Returns {@code TypeInformation.of(IngestResult.class)}, a POJO type: no Kryo anywhere. */
    @Override
    public TypeInformation<IngestResult> getProducedType() {
        return TypeInformation.of(IngestResult.class);
    }

    private IngestResult ingest(ConsumerRecord<byte[], byte[]> record) {
        Map<String, byte[]> headers = lastValuePerKey(record.headers());
        try {
            JsonNode payload = parseJsonObject(record.value());
            String messageId = extractId(record, payload);
            Event event = new Event(
                    messageId,
                    record.value(),
                    record.topic(),
                    record.partition(),
                    record.offset(),
                    record.timestamp(),
                    headers);
            event.sourceKey = record.key();
            return IngestResult.accepted(event);
        } catch (Rejection rejection) {
            return IngestResult.rejected(new DeadLetter(
                    record.key(),
                    record.value(),
                    rejection.reason,
                    rejection.getMessage(),
                    record.topic(),
                    record.partition(),
                    record.offset(),
                    record.timestamp(),
                    headers));
        }
    }

    private static Map<String, byte[]> lastValuePerKey(Headers headers) {
        Map<String, byte[]> lastValues = new HashMap<>();
        for (Header header : headers) {
            lastValues.put(header.key(), header.value());
        }
        return lastValues;
    }

    /** Checks the value up to and including {@code NOT_A_JSON_OBJECT}; returns the parsed object. */
    private JsonNode parseJsonObject(byte[] value) {
        if (value == null) {
            throw new Rejection(DeadLetterReason.NULL_VALUE, "the value is null (a tombstone)");
        }
        if (value.length > maxMessageBytes) {
            throw new Rejection(
                    DeadLetterReason.PAYLOAD_TOO_LARGE,
                    "the value has " + value.length + " bytes, more than the maximum of " + maxMessageBytes);
        }
        CharBuffer text = utf8().decode(value, VALUE_SUBJECT);
        JsonNode root = json.parse(text);
        if (!root.isObject()) {
            throw new Rejection(
                    DeadLetterReason.NOT_A_JSON_OBJECT,
                    "the value is " + describeJsonType(root) + ", not a JSON object: " + Rejection.quote(text));
        }
        PostgresJsonLimits.check(text);
        return root;
    }

    /** Checks and returns the id, from {@code MISSING_ID} to {@code ID_TOO_LONG}. */
    private String extractId(ConsumerRecord<byte[], byte[]> record, JsonNode payload) {
        String id = switch (idSource.kind()) {
            case HEADER -> headerId(record.headers());
            case JSON_POINTER -> pointerId(payload);
            case KEY -> keyId(record.key());
        };
        if (id.isBlank()) {
            throw new Rejection(
                    DeadLetterReason.EMPTY_ID,
                    idSource.idDescription()
                            + (id.isEmpty() ? " is empty" : " is only white space: " + Rejection.quote(id)));
        }
        if (id.indexOf(0) >= 0) {
            throw new Rejection(DeadLetterReason.UNSUPPORTED_CHARACTER,
                    idSource.idDescription() + " holds U+0000, which PostgreSQL text cannot store");
        }
        if (id.length() > maxIdLength) {
            throw new Rejection(
                    DeadLetterReason.ID_TOO_LONG,
                    idSource.idDescription() + " has " + id.length() + " chars, more than the maximum of " + maxIdLength
                            + ": " + Rejection.quote(id));
        }
        // Only ids that could exceed the byte limit pay for measuring it (at most 3 bytes per char).
        if ((long) id.length() * 3 > maxIdBytes) {
            int bytes = id.getBytes(StandardCharsets.UTF_8).length;
            if (bytes > maxIdBytes) {
                throw new Rejection(
                        DeadLetterReason.ID_TOO_LONG,
                        idSource.idDescription() + " has " + bytes + " bytes in UTF-8, more than the "
                                + maxIdBytes + " that the PostgreSQL table's primary key can index: "
                                + Rejection.quote(id));
            }
        }
        return id;
    }

    private String headerId(Headers headers) {
        Header header = headers.lastHeader(idSource.headerName());
        if (header == null || header.value() == null) {
            throw new Rejection(
                    DeadLetterReason.MISSING_ID,
                    idSource.idDescription() + " is missing: "
                            + (header == null ? "the record has no such header" : "the header has a null value"));
        }
        return decodeId(header.value());
    }

    private String keyId(byte[] key) {
        if (key == null) {
            throw new Rejection(
                    DeadLetterReason.MISSING_ID, idSource.idDescription() + " is missing: the key is null");
        }
        return decodeId(key);
    }

    private String decodeId(byte[] bytes) {
        return utf8().decode(bytes, idSource.idDescription()).toString();
    }

    private String pointerId(JsonNode payload) {
        JsonNode id = payload.at(idSource.jsonPointer());
        if (id.isTextual()) {
            return id.textValue();
        }
        if (id.isIntegralNumber()) {
            return id.asText();
        }
        if (id.isMissingNode()) {
            throw new Rejection(
                    DeadLetterReason.MISSING_ID, idSource.idDescription() + " is missing: the pointer matches nothing");
        }
        throw new Rejection(
                DeadLetterReason.INVALID_ID_TYPE,
                idSource.idDescription() + " is " + describeJsonType(id)
                        + ", not a string or an integral number: " + Rejection.quote(id.toString()));
    }

    /** E.g. "a JSON array", "a non-integral JSON number". */
    private static String describeJsonType(JsonNode node) {
        if (node.isNumber() && !node.isIntegralNumber()) {
            return "a non-integral JSON number";
        }
        return "a JSON " + node.getNodeType().name().toLowerCase(Locale.ROOT);
    }

    private StrictUtf8Decoder utf8() {
        if (utf8 == null) {
            utf8 = new StrictUtf8Decoder();
        }
        return utf8;
    }
}
