package io.onceflow.ingest;

import java.util.List;
import java.util.Properties;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.KafkaSourceBuilder;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.kafka.clients.consumer.ConsumerConfig;

/**
 * Builds the {@link KafkaSource} of the job. Offsets live in Flink checkpoints; committing them to
 * Kafka on checkpoint is only so that lag monitoring works, never what recovery reads.
 */
public final class KafkaInput {
    private KafkaInput() {}

    /**
     * @param startingOffsets where to start when there is no checkpoint or savepoint to restore
     * @param clientProperties pass-through client settings (security.protocol, sasl.*, ssl.*)
     */
    public static KafkaSourceBuilder<IngestResult> sourceBuilder(
            String bootstrapServers,
            Properties clientProperties,
            List<String> topics,
            String groupId,
            OffsetsInitializer startingOffsets,
            IngestDeserializer deserializer) {
        return KafkaSource.<IngestResult>builder()
                .setBootstrapServers(bootstrapServers)
                .setProperties(clientProperties)
                .setTopics(topics)
                .setGroupId(groupId)
                .setStartingOffsets(startingOffsets)
                .setDeserializer(deserializer)
                // input written by transactional producers: never process an aborted record
                .setProperty(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed")
                .setProperty(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false")
                .setProperty("commit.offsets.on.checkpoint", "true");
    }
}
