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
     * Judges each input record as the job does (the audit uses it too, to judge alike).
     *
     * @param messageIdSource where each record's message id is found, as {@link MessageIdSource#parse} reads it
     * @param maxMessageBytes the largest accepted value, in bytes
     * @param maxIdLength the longest accepted id, in UTF-16 chars
     * @param idsStoredInPostgres whether a PostgreSQL sink stores the ids, whose primary key then
     *     limits them to {@link IngestDeserializer#POSTGRES_MAX_ID_BYTES}
     */
    public static IngestDeserializer deserializer(
            String messageIdSource, int maxMessageBytes, int maxIdLength, boolean idsStoredInPostgres,
            JsonLimits jsonLimits) {
        return new IngestDeserializer(
                MessageIdSource.parse(messageIdSource),
                maxMessageBytes,
                maxIdLength,
                idsStoredInPostgres ? IngestDeserializer.POSTGRES_MAX_ID_BYTES : Integer.MAX_VALUE,
                jsonLimits);
    }

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
