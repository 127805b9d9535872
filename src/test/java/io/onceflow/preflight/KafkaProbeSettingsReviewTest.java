package io.onceflow.preflight;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.config.OnceflowConfig;
import io.onceflow.config.ValidSettings;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/**
 * Review of issue 34 (adversarial): the transactional-id probe is built from the pass-through client
 * properties as they are, while the sinks set acks=all and enable.idempotence=true over them
 * (KafkaSinks.build). With kafka.properties.acks=1 the probe's own Kafka client refuses to start, before
 * it reaches any broker, and the start check refuses a job whose sinks would work, blaming the brokers'
 * transaction log. (No broker is needed to show it: nothing listens on the address.)
 */
class KafkaProbeSettingsReviewTest {
    @Test
    void producerTuningThatTheSinksOverrideDoesNotFailTheProbe() {
        Map<String, String> settings = ValidSettings.required();
        settings.put("kafka.bootstrap.servers", "127.0.0.1:1");
        settings.put("kafka.properties.acks", "1");
        OnceflowConfig config = OnceflowConfig.fromMap(settings, Map.of());

        Optional<String> problem = new KafkaAccess(config).transactionalIdProblem(config.kafkaTransactionTimeout());

        assertThat(problem).as("the probe's client refused settings the sinks override")
                .hasValueSatisfying(line -> assertThat(line).doesNotContain("idempotence"));
    }
}
