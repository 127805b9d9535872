package io.onceflow.testing.cluster;

import io.onceflow.tools.generator.EventGenerator;
import io.onceflow.tools.generator.GeneratedInput;
import io.onceflow.tools.generator.GeneratorSpec;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Keeps writing generated input (duplicates and poison included) at a bounded rate on its own thread,
 * in chunks of {@link EventGenerator} runs with distinct seeds, until asked to stop and at least the
 * minimum number of records is out. Now and then it re-sends a whole earlier chunk byte for byte, so
 * duplicates also straddle checkpoints, restarts and savepoints. Each chunk also carries a few
 * valid records that the job accepts but the database refuses ({@link #REFUSED_FIELD}, which the
 * test's CHECK constraint forbids). Keeps the ground truth: how many records, unique ids, poison
 * records and refused ids went out.
 *
 * <p>The producer waits out broker restarts (long delivery timeout, idempotence) rather than fail.
 */
public final class ContinuousProducer implements AutoCloseable {
    private static final int CHUNK_RECORDS = 1_000;
    /** One chunk in this many re-sends an earlier chunk. */
    private static final int RESEND_EVERY = 10;
    /** Records per chunk that PostgreSQL refuses (they carry this field). */
    private static final int REFUSED_PER_CHUNK = 3;
    public static final String REFUSED_FIELD = "refusedByTheDatabase";

    private final String bootstrapServers;
    private final String topic;
    private final long minimumRecords;
    private final int recordsPerSecond;
    private final int maxMessageBytes;
    private final int maxIdLength;
    private final AtomicBoolean stopRequested = new AtomicBoolean();
    private final AtomicBoolean aborted = new AtomicBoolean();
    private final AtomicLong recordsSent = new AtomicLong();
    private final Thread thread;
    private final List<Long> sentSeeds = new ArrayList<>();
    private long uniqueIds;
    private long poisonRecords;
    private long refusedIds;
    private volatile Throwable failure;

    public ContinuousProducer(String bootstrapServers, String topic, long minimumRecords, int recordsPerSecond,
            int maxMessageBytes, int maxIdLength) {
        this.bootstrapServers = bootstrapServers;
        this.topic = topic;
        this.minimumRecords = minimumRecords;
        this.recordsPerSecond = recordsPerSecond;
        this.maxMessageBytes = maxMessageBytes;
        this.maxIdLength = maxIdLength;
        this.thread = new Thread(this::produceUntilStopped, "chaos-producer");
        thread.setDaemon(true); // a producer stuck on a dead broker must not keep the test JVM alive
    }

    public void start() {
        thread.start();
    }

    private void produceUntilStopped() {
        SplittableRandom random = new SplittableRandom(7);
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        // ride out a broker kill -9 and restart instead of dropping records
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "300000");
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "300000");
        try (KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer())) {
            long started = System.nanoTime();
            while (!aborted.get() && (!stopRequested.get() || recordsSent.get() < minimumRecords)) {
                boolean resend = !sentSeeds.isEmpty() && random.nextInt(RESEND_EVERY) == 0;
                long seed = resend ? sentSeeds.get(random.nextInt(sentSeeds.size())) : 1_000L + sentSeeds.size();
                GeneratedInput chunk = new EventGenerator(new GeneratorSpec(
                        CHUNK_RECORDS, 0.10, 0.02, 0, maxMessageBytes, maxIdLength, seed)).produce(producer, topic);
                for (int i = 0; i < REFUSED_PER_CHUNK; i++) {
                    String id = "refused-" + seed + "-" + i;
                    producer.send(new ProducerRecord<>(topic, null, null, utf8(id),
                            utf8("{\"id\":\"" + id + "\",\"" + REFUSED_FIELD + "\":true}"),
                            List.of(new RecordHeader(EventGenerator.ID_HEADER, utf8(id)))));
                }
                synchronized (this) {
                    if (!resend) {
                        sentSeeds.add(seed);
                        uniqueIds += chunk.uniqueIds().size() + REFUSED_PER_CHUNK;
                        refusedIds += REFUSED_PER_CHUNK;
                    }
                    poisonRecords += chunk.poisonRecords();
                }
                long sent = recordsSent.addAndGet(chunk.records() + REFUSED_PER_CHUNK);
                long dueNanos = started + sent * 1_000_000_000L / recordsPerSecond;
                long aheadMillis = (dueNanos - System.nanoTime()) / 1_000_000;
                if (aheadMillis > 0) {
                    Thread.sleep(aheadMillis);
                }
            }
        } catch (Throwable e) {
            failure = e;
        }
    }

    public long recordsSent() {
        return recordsSent.get();
    }

    /** Asks the producer to stop once the minimum is out, and waits until every record is acknowledged. */
    public GroundTruth stopAndAwait(long timeoutMillis) throws InterruptedException {
        stopRequested.set(true);
        thread.join(timeoutMillis);
        if (thread.isAlive()) {
            throw new IllegalStateException("the producer did not finish within " + timeoutMillis + " ms");
        }
        if (failure != null) {
            throw new IllegalStateException("the producer failed", failure);
        }
        synchronized (this) {
            return new GroundTruth(recordsSent.get(), uniqueIds, poisonRecords, refusedIds);
        }
    }

    /**
     * What went into the input topic.
     *
     * @param refusedIds unique ids (among {@code uniqueIds}) that PostgreSQL refuses
     */
    public record GroundTruth(long records, long uniqueIds, long poisonRecords, long refusedIds) {}

    private static byte[] utf8(String text) {
        return text.getBytes(StandardCharsets.UTF_8);
    }

    @Override
    public void close() throws InterruptedException {
        aborted.set(true);
        thread.interrupt();
        thread.join(10_000);
    }
}
