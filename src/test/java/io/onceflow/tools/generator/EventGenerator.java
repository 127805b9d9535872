package io.onceflow.tools.generator;

import static java.nio.charset.StandardCharsets.UTF_8;

import io.onceflow.ingest.DeadLetterReason;
import java.time.Instant;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;

/**
 * Produces payment and order events shaped like the ones in onceflow's background reading, with
 * re-sent duplicates and poison records, and returns the ground truth of what it sent.
 *
 * <p>Each valid record carries its id three ways (the {@code message-id} header, the JSON field
 * {@code /id} and the record key), so the same input works with every message-id source. A re-send
 * is byte-for-byte the first send. Payloads are a pure function of (seed, index), so re-sends need
 * no storage and 10M-record runs fit in memory (two longs per id).
 */
public final class EventGenerator {
    /** The header the generated records carry their id in (the job's default id source). */
    public static final String ID_HEADER = "message-id";
    /**
     * Payments go to user ids 1..ACCOUNTS, for 1.00 to 99.99: a ledger of that many accounts (the
     * demo's) sees each account pay several times.
     */
    public static final int ACCOUNTS = 10_000;

    private static final List<DeadLetterReason> POISON_KINDS = Arrays.asList(
            DeadLetterReason.MALFORMED_JSON,
            DeadLetterReason.NOT_A_JSON_OBJECT,
            DeadLetterReason.MISSING_ID,
            DeadLetterReason.EMPTY_ID,
            DeadLetterReason.ID_TOO_LONG,
            DeadLetterReason.PAYLOAD_TOO_LARGE,
            DeadLetterReason.NULL_VALUE,
            DeadLetterReason.INVALID_UTF8,
            DeadLetterReason.UNSUPPORTED_CHARACTER,
            DeadLetterReason.NUMBER_OUT_OF_RANGE);

    private final GeneratorSpec spec;

    public EventGenerator(GeneratorSpec spec) {
        this.spec = spec;
    }

    /**
     * Sends {@link GeneratorSpec#records()} records to {@code topic} and waits until the broker
     * acknowledged every one of them.
     */
    public GeneratedInput produce(Producer<byte[], byte[]> producer, String topic) {
        SplittableRandom random = new SplittableRandom(spec.seed());
        GeneratedInput truth = new GeneratedInput();
        long[] idHigh = new long[(int) Math.min(spec.records(), Integer.MAX_VALUE - 8)];
        long[] idLow = new long[idHigh.length];
        int validSent = 0;
        long poisonSent = 0;
        // every send is checked, not only the last: a refused batch (e.g. after a leader change) would
        // otherwise leave ids in the ground truth that never reached the topic
        AtomicLong refused = new AtomicLong();
        AtomicReference<Exception> firstRefusal = new AtomicReference<>();
        for (long i = 0; i < spec.records(); i++) {
            double roll = random.nextDouble();
            ProducerRecord<byte[], byte[]> record;
            if (roll < spec.poisonRatio()) {
                DeadLetterReason kind = POISON_KINDS.get((int) (poisonSent++ % POISON_KINDS.size()));
                record = poison(topic, kind, i);
                truth.recordPoison(kind);
            } else if (roll < spec.poisonRatio() + spec.duplicateRatio() && validSent > 0) {
                int earlier = random.nextInt(validSent);
                record = valid(topic, earlier, new UUID(idHigh[earlier], idLow[earlier]).toString());
                truth.recordDuplicate();
            } else {
                UUID id = new UUID(random.nextLong(), random.nextLong());
                idHigh[validSent] = id.getMostSignificantBits();
                idLow[validSent] = id.getLeastSignificantBits();
                record = valid(topic, validSent, id.toString());
                truth.recordFirstSend(id.toString());
                validSent++;
            }
            producer.send(record, (metadata, error) -> {
                if (error != null) {
                    refused.incrementAndGet();
                    firstRefusal.compareAndSet(null, error);
                }
            });
        }
        producer.flush();
        if (refused.get() > 0) {
            throw new IllegalStateException("the broker did not acknowledge " + refused.get() + " of the "
                    + spec.records() + " generated records", firstRefusal.get());
        }
        return truth;
    }

    private ProducerRecord<byte[], byte[]> valid(String topic, int index, String id) {
        byte[] idBytes = id.getBytes(UTF_8);
        return record(topic, idBytes, payload(index, id).getBytes(UTF_8), idBytes);
    }

    /** A payment or an order, decided by the index; deterministic in (seed, index). */
    String payload(int index, String id) {
        SplittableRandom fields = new SplittableRandom(spec.seed() * 31 + index);
        Instant createdAt = Instant.ofEpochSecond(1_767_225_600L + index);
        StringBuilder json = new StringBuilder(spec.payloadBytes() + 64);
        if (index % 2 == 0) {
            json.append("{\"id\":\"").append(id)
                    .append("\",\"type\":\"payment\",\"payment_id\":\"pay-").append(index)
                    .append("\",\"user_id\":").append(fields.nextInt(1, ACCOUNTS + 1))
                    .append(",\"amount\":").append(String.format(Locale.ROOT, "%.2f", fields.nextInt(100, 10_000) / 100.0))
                    .append(",\"currency\":\"RUB\",\"status\":\"captured\",\"created_at\":\"").append(createdAt).append('"');
        } else {
            int quantity = fields.nextInt(1, 5);
            json.append("{\"id\":\"").append(id)
                    .append("\",\"type\":\"order\",\"order_id\":\"ord-").append(index)
                    .append("\",\"customer_id\":").append(fields.nextInt(1, 1_000_000))
                    .append(",\"items\":[{\"sku\":\"SKU-").append(fields.nextInt(1000, 9999))
                    .append("\",\"qty\":").append(quantity)
                    .append("}],\"total\":").append(String.format(Locale.ROOT, "%.2f", quantity * fields.nextInt(100, 100_000) / 100.0))
                    .append(",\"created_at\":\"").append(createdAt).append('"');
        }
        int padding = spec.payloadBytes() - json.length() - 12;
        if (padding > 0) {
            json.append(",\"note\":\"").append("x".repeat(padding)).append('"');
        }
        return json.append('}').toString();
    }

    private ProducerRecord<byte[], byte[]> poison(String topic, DeadLetterReason kind, long index) {
        String id = "poison-" + index;
        byte[] idBytes = id.getBytes(UTF_8);
        switch (kind) {
            case MALFORMED_JSON:
                return record(topic, idBytes, ("{\"id\":\"" + id + "\",\"amount\":12").getBytes(UTF_8), idBytes);
            case NOT_A_JSON_OBJECT:
                return record(topic, idBytes, ("[\"" + id + "\",1,2]").getBytes(UTF_8), idBytes);
            case MISSING_ID:
                return record(topic, null, "{\"type\":\"payment\",\"amount\":1.00}".getBytes(UTF_8), null);
            case EMPTY_ID:
                return record(topic, new byte[0], "{\"id\":\"\",\"type\":\"payment\"}".getBytes(UTF_8), new byte[0]);
            case ID_TOO_LONG: {
                String longId = id + "-" + "x".repeat(spec.maxIdLength());
                byte[] longIdBytes = longId.getBytes(UTF_8);
                return record(topic, longIdBytes, ("{\"id\":\"" + longId + "\"}").getBytes(UTF_8), longIdBytes);
            }
            case PAYLOAD_TOO_LARGE: {
                String prefix = "{\"id\":\"" + id + "\",\"note\":\"";
                int fill = spec.maxMessageBytes() + 1 - prefix.length() - 2;
                return record(topic, idBytes, (prefix + "x".repeat(Math.max(fill, 0)) + "\"}").getBytes(UTF_8), idBytes);
            }
            case NULL_VALUE:
                return record(topic, idBytes, null, idBytes);
            case INVALID_UTF8: {
                byte[] value = ("{\"id\":\"" + id + "\",\"name\":\"??\"}").getBytes(UTF_8);
                int question = value.length - 4;
                value[question] = (byte) 0xC3; // a two-byte lead followed by '(' is not UTF-8
                value[question + 1] = (byte) 0x28;
                return record(topic, idBytes, value, idBytes);
            }
            case UNSUPPORTED_CHARACTER:
                return record(topic, idBytes, ("{\"id\":\"" + id + "\",\"note\":\"a\\u0000b\"}").getBytes(UTF_8), idBytes);
            case NUMBER_OUT_OF_RANGE:
                return record(topic, idBytes, ("{\"id\":\"" + id + "\",\"amount\":1e999999}").getBytes(UTF_8), idBytes);
            default:
                throw new IllegalStateException("no poison of kind " + kind);
        }
    }

    private static ProducerRecord<byte[], byte[]> record(String topic, byte[] key, byte[] value, byte[] idHeader) {
        List<Header> headers = idHeader == null ? List.of() : List.of(new RecordHeader(ID_HEADER, idHeader));
        return new ProducerRecord<>(topic, null, null, key, value, headers);
    }
}
