package io.onceflow.sink.postgres.options;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.CommonClientConfigs;

/**
 * A Kafka topic that receives each effect's outcome (applied, rejected or failed, with its result)
 * exactly once, per source partition in the order the outcomes were decided, for {@code
 * read_committed} consumers. See docs/effects.md, "Outcomes in Kafka".
 *
 * @param topic the results topic; it must exist
 * @param kafkaClientProperties {@code bootstrap.servers} and the client's security settings
 *     ({@code security.protocol}, {@code sasl.*}, {@code ssl.*}); never shown by {@link #toString()}
 */
public record EffectResultsTopic(String topic, Properties kafkaClientProperties) implements Serializable {

    public EffectResultsTopic {
        Properties copy = new Properties();
        if (kafkaClientProperties != null) {
            copy.putAll(kafkaClientProperties);
        }
        kafkaClientProperties = copy;
    }

    /** Every problem with these settings, each saying what to do; empty when they are valid. */
    public List<String> problems() {
        List<String> problems = new ArrayList<>();
        if (topic == null || topic.isBlank()) {
            problems.add("the effect results topic is empty: name an existing Kafka topic, or set none");
        }
        if (kafkaClientProperties.getProperty(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, "").isBlank()) {
            problems.add("the effect results topic has no bootstrap.servers in its Kafka client properties");
        }
        return problems;
    }

    /** The topic and the brokers; the client properties stay out, since they may hold a password. */
    @Override
    public String toString() {
        return "EffectResultsTopic[topic=" + topic + ", bootstrap.servers="
                + kafkaClientProperties.getProperty(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG) + "]";
    }
}
