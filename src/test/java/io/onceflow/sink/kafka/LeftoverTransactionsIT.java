package io.onceflow.sink.kafka;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.api.Event;
import io.onceflow.testing.Eventually;
import io.onceflow.testing.MiniClusters;
import io.onceflow.testing.TestKafka;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * On a MiniCluster, the sink's post-commit step aborts what dead attempts of subtasks 0 and 1 left
 * open after the restored checkpoint (none: a first start), once the job's first checkpoint has
 * completed, though the sink has written nothing: the committer passes on each completed
 * checkpoint, committables or none.
 */
class LeftoverTransactionsIT {
    @RegisterExtension
    static final MiniClusterExtension FLINK = MiniClusters.fourSlots();

    @Test
    void aRunningSinkAbortsWhatDeadAttemptsLeftOpen() throws Exception {
        TestKafka kafka = TestKafka.shared();
        String topic = TestKafka.uniqueTopic("leftovers-it");
        kafka.createTopics(2, topic);
        String prefix = "leftovers-it-" + System.nanoTime();
        String sinkPrefix = KafkaSinks.transactionalIdPrefixes(prefix).get(0);
        List<String> leftovers = List.of(sinkPrefix + "-" + AttemptTags.newTag() + "-0-1",
                sinkPrefix + "-" + AttemptTags.newTag() + "-1-1");
        List<KafkaProducer<byte[], byte[]>> dead = leftovers.stream().map(id -> openTransaction(kafka, topic, id)).toList();
        assertThat(PendingKafkaTransactions.ongoing(kafka.bootstrapServers(), new Properties(), sinkPrefix))
                .containsExactlyInAnyOrderElementsOf(leftovers);

        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(2);
        env.enableCheckpointing(300);
        env.fromSequence(0, Long.MAX_VALUE).filter(n -> false).map(n -> (Event) null).returns(Event.class)
                .sinkTo(new KafkaSinks(kafka.bootstrapServers(), new Properties(), DeliveryGuarantee.EXACTLY_ONCE,
                        prefix, Duration.ofMinutes(5), KafkaWriterGate.OPEN).output(topic))
                .uid("output").name("Output topic");
        JobClient job = env.executeAsync("leftovers-it");
        try {
            Eventually.await("the dead attempts' transactions aborted", Duration.ofSeconds(60), Duration.ofMillis(500),
                    () -> PendingKafkaTransactions.ongoing(kafka.bootstrapServers(), new Properties(), sinkPrefix)
                            .isEmpty());
        } finally {
            job.cancel().get();
            dead.forEach(KafkaProducer::close);
        }
    }

    /** An open transaction with one record, as a killed attempt leaves it. */
    static KafkaProducer<byte[], byte[]> openTransaction(TestKafka kafka, String topic, String transactionalId) {
        Properties properties = new Properties();
        properties.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
        properties.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(properties, new ByteArraySerializer(), new ByteArraySerializer());
        producer.initTransactions();
        producer.beginTransaction();
        producer.send(new ProducerRecord<>(topic, "left".getBytes()));
        producer.flush();
        return producer;
    }
}
