package io.onceflow.chaos;

import io.onceflow.tools.generator.EventGenerator;
import io.onceflow.tools.generator.GeneratedInput;
import io.onceflow.tools.generator.GeneratorSpec;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Keeps writing generated input (duplicates and poison included) at a bounded rate on its own thread,
 * in chunks of {@link EventGenerator} runs with distinct seeds, until asked to stop and at least the
 * minimum number of records is out. Now and then it re-sends a whole earlier chunk byte for byte, so
 * duplicates also straddle checkpoints, restarts and savepoints. Keeps the ground truth: how many
 * records, unique ids and poison records went out.
 *
 * <p>The producer waits out broker restarts (long delivery timeout, idempotence) rather than fail.
 */
final class ContinuousProducer implements AutoCloseable {
    private static final int CHUNK_RECORDS = 1_000;
    /** One chunk in this many re-sends an earlier chunk. */
    private static final int RESEND_EVERY = 10;

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
    private volatile Throwable failure;

    ContinuousProducer(String bootstrapServers, String topic, long minimumRecords, int recordsPerSecond,
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

    void start() {
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
                synchronized (this) {
                    if (!resend) {
                        sentSeeds.add(seed);
                        uniqueIds += chunk.uniqueIds().size();
                    }
                    poisonRecords += chunk.poisonRecords();
                }
                long sent = recordsSent.addAndGet(chunk.records());
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

    long recordsSent() {
        return recordsSent.get();
    }

    /** Asks the producer to stop once the minimum is out, and waits until every record is acknowledged. */
    GroundTruth stopAndAwait(long timeoutMillis) throws InterruptedException {
        stopRequested.set(true);
        thread.join(timeoutMillis);
        if (thread.isAlive()) {
            throw new IllegalStateException("the producer did not finish within " + timeoutMillis + " ms");
        }
        if (failure != null) {
            throw new IllegalStateException("the producer failed", failure);
        }
        synchronized (this) {
            return new GroundTruth(recordsSent.get(), uniqueIds, poisonRecords);
        }
    }

    /** What went into the input topic. */
    record GroundTruth(long records, long uniqueIds, long poisonRecords) {}

    @Override
    public void close() throws InterruptedException {
        aborted.set(true);
        thread.interrupt();
        thread.join(10_000);
    }
}
