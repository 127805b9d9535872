package io.onceflow.sink.kafka;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.time.Duration;
import java.util.Properties;
import org.apache.commons.lang3.ClassUtils;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.util.FlinkRuntimeException;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TimeoutException;
import org.junit.jupiter.api.Test;

/**
 * What the wrapper contains and that Flink sees the same sink through it; {@code WokenTaskManagerIT}
 * shows on a real cluster that a woken TaskManager survives because of it.
 */
class GuardedKafkaSinkTest {

    @Test
    void findsTheFencingErrorsAsTheConnectorWrapsThem() {
        // KafkaWriter.checkAsyncException: IOException(FlinkRuntimeException(InvalidProducerEpochException))
        IOException asyncSend = new IOException("One or more Kafka Producer send requests have encountered exception",
                new FlinkRuntimeException("Failed to send data to Kafka", new InvalidProducerEpochException("old epoch")));
        assertThat(GuardedKafkaSink.fencingError(asyncSend)).containsInstanceOf(
                InvalidProducerEpochException.class);
        assertThat(GuardedKafkaSink.fencingError(new KafkaException("abort failed",
                new ProducerFencedException("newer producer")))).containsInstanceOf(ProducerFencedException.class);
    }

    @Test
    void leavesEveryOtherErrorAlone() {
        assertThat(GuardedKafkaSink.fencingError(new IOException("send failed",
                new TimeoutException("broker gone")))).isEmpty();
        assertThat(GuardedKafkaSink.fencingError(new IllegalStateException("Could not close current"
                + " producer"))).isEmpty();
    }

    /** Flink picks a sink's operators by its interfaces: the wrapper must have all of KafkaSink's. */
    @Test
    void implementsEveryInterfaceOfTheConnectorsSink() {
        KafkaSinks sinks = new KafkaSinks("localhost:9092", new Properties(), DeliveryGuarantee.EXACTLY_ONCE,
                "interfaces", Duration.ofMinutes(5), KafkaWriterGate.OPEN);
        assertThat(ClassUtils.getAllInterfaces(sinks.output("out").getClass()))
                .containsAll(ClassUtils.getAllInterfaces(KafkaSink.class));
    }
}
