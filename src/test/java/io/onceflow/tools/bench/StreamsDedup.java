package io.onceflow.tools.bench;

import static java.nio.charset.StandardCharsets.UTF_8;

import io.onceflow.tools.generator.EventGenerator;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.PunctuationType;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

/**
 * The benchmark's Kafka Streams counterpart of onceflow's dedup (scenario {@code streams}), a program
 * of its own that {@link KafkaOnlyScenario} runs as a child JVM: reads the input topic, takes the
 * message id from the {@code message-id} header (the job's default id source, which the benchmark
 * uses), and forwards the first record of each id, unchanged (key, value, headers), to the output
 * topic, with {@code processing.guarantee=exactly_once_v2}.
 *
 * <p>The ids seen are a persistent (RocksDB) key-value store keyed by message id, holding the wall
 * clock time an id was first seen; the store's changelog topic is Kafka Streams' fault tolerance, as
 * checkpoints are Flink's. The TTL is the job's, in processing time as Flink's state TTL: an id older
 * than the TTL counts as unseen when read (exact, as Flink's {@code NeverReturnExpired}), and a
 * wall-clock punctuator deletes expired ids every {@link #EXPIRY_SCAN_INTERVAL} to bound the store
 * (Flink's RocksDB compaction filter does that in the background). Not a windowed store: its
 * retention follows stream time (record timestamps), not processing time, and each lookup is a range
 * fetch over its segments, where a key-value store's is the one point lookup Flink's RocksDB dedup
 * does.
 *
 * <p>No repartition: a record's key is its id (so the default partitioner put every re-send on the
 * partition of its first send), so the dedup of each partition's task is complete. Ids that are not
 * the key would need {@code repartition()} by id, a round trip through the broker per record, where
 * onceflow's {@code keyBy} shuffles in memory.
 *
 * <p>Arguments: bootstrap servers, input topic, output topic, application id, state directory,
 * commit interval (ms), stream threads, TTL (ms). Prints {@value #RUNNING_MARKER} when the
 * application is running; runs until SIGTERM, then closes; exits with status 1 if it fails.
 */
public final class StreamsDedup {
    static final String RUNNING_MARKER = "streams-dedup: RUNNING";
    private static final String STORE = "seen-message-ids";
    /** Never reached in a benchmark run, like the compaction that would drop Flink's expired ids. */
    private static final Duration EXPIRY_SCAN_INTERVAL = Duration.ofHours(1);
    private static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(30);

    private StreamsDedup() {}

    public static void main(String[] args) throws InterruptedException {
        if (args.length != 8) {
            throw new IllegalArgumentException("expected 8 arguments (see the class comment), got " + List.of(args));
        }
        String input = args[1];
        String output = args[2];
        Duration ttl = Duration.ofMillis(Long.parseLong(args[7]));
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[3]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, args[5]);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, args[6]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1); // the changelog topic, on the one broker
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");

        KafkaStreams streams = new KafkaStreams(topology(input, output, ttl), props);
        CountDownLatch failed = new CountDownLatch(1);
        streams.setStateListener((state, before) -> {
            if (state == KafkaStreams.State.RUNNING) {
                System.out.println(RUNNING_MARKER);
            } else if (state == KafkaStreams.State.ERROR) {
                failed.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            e.printStackTrace();
            return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> streams.close(CLOSE_TIMEOUT), "streams-dedup-close"));
        streams.start();
        failed.await(); // a SIGTERM ends the JVM while waiting here
        System.exit(1);
    }

    static Topology topology(String input, String output, Duration ttl) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.addStateStore(Stores.keyValueStoreBuilder(
                Stores.persistentKeyValueStore(STORE), Serdes.String(), Serdes.Long()));
        builder.stream(input, Consumed.with(Serdes.ByteArray(), Serdes.ByteArray()))
                .process(() -> new FirstOccurrences(ttl), STORE)
                .to(output, Produced.with(Serdes.ByteArray(), Serdes.ByteArray()));
        return builder.build();
    }

    /** Forwards a record whose id is not in the store (or expired there), and records the id. */
    private static final class FirstOccurrences implements Processor<byte[], byte[], byte[], byte[]> {
        private final long ttlMillis;
        private ProcessorContext<byte[], byte[]> context;
        private KeyValueStore<String, Long> seen;

        FirstOccurrences(Duration ttl) {
            this.ttlMillis = ttl.toMillis();
        }

        @Override
        public void init(ProcessorContext<byte[], byte[]> context) {
            this.context = context;
            this.seen = context.getStateStore(STORE);
            context.schedule(EXPIRY_SCAN_INTERVAL, PunctuationType.WALL_CLOCK_TIME, this::deleteExpired);
        }

        @Override
        public void process(Record<byte[], byte[]> record) {
            Header idHeader = record.headers().lastHeader(EventGenerator.ID_HEADER);
            if (idHeader == null) {
                return; // the benchmark's input has none such; onceflow would dead-letter it
            }
            String id = new String(idHeader.value(), UTF_8);
            long now = context.currentSystemTimeMs();
            Long firstSeen = seen.get(id);
            if (firstSeen != null && now - firstSeen < ttlMillis) {
                return;
            }
            seen.put(id, now);
            context.forward(record);
        }

        private void deleteExpired(long now) {
            try (KeyValueIterator<String, Long> all = seen.all()) {
                while (all.hasNext()) {
                    KeyValue<String, Long> entry = all.next();
                    if (now - entry.value >= ttlMillis) {
                        seen.delete(entry.key);
                    }
                }
            }
        }
    }
}
