package io.onceflow.sink.kafka;

import java.io.IOException;
import java.io.Serializable;
import org.apache.flink.annotation.Internal;

/**
 * What a Kafka writer attempt must pass before it creates its first producer (see
 * {@link GuardedKafkaSink}). Runs on the task, once per writer attempt.
 */
@Internal
@FunctionalInterface
public interface KafkaWriterGate extends Serializable {
    /** A gate that lets every attempt through: a job without a registered run. */
    KafkaWriterGate OPEN = () -> {};

    /**
     * Returns when the attempt may create producers; throws to stop it before it does.
     *
     * @throws IOException if the check itself failed (Flink restarts the attempt)
     */
    void beforeProducersStart() throws IOException;
}
