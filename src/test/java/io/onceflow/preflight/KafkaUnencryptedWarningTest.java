package io.onceflow.preflight;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.config.OnceflowConfig;
import io.onceflow.config.ValidSettings;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The warning about Kafka brokers on other hosts reached without TLS. */
class KafkaUnencryptedWarningTest {
    private static OnceflowConfig config(String brokers, Map<String, String> kafkaProperties) {
        Map<String, String> settings = ValidSettings.required();
        settings.put("kafka.bootstrap.servers", brokers);
        kafkaProperties.forEach((name, value) -> settings.put("kafka.properties." + name, value));
        return OnceflowConfig.fromMap(settings, Map.of());
    }

    @ParameterizedTest
    @ValueSource(strings = {"PLAINTEXT", "SASL_PLAINTEXT", "sasl_plaintext"})
    void remoteBrokersWithoutTlsAreWarnedAbout(String protocol) {
        assertThat(KafkaPreflight.unencryptedWarning(config("kafka-1:9092,kafka-2:9092",
                Map.of("security.protocol", protocol)))).hasValueSatisfying(warning -> assertThat(warning)
                .startsWith("kafka.properties.security.protocol: the job reaches the Kafka brokers at"
                        + " kafka-1:9092,kafka-2:9092 with " + protocol.toUpperCase() + ", without TLS")
                .contains("SASL_SSL or SSL"));
    }

    @Test
    void noSecurityProtocolIsPlaintext() {
        assertThat(KafkaPreflight.unencryptedWarning(config("10.0.0.5:9092", Map.of()))).isPresent();
    }

    @ParameterizedTest
    @ValueSource(strings = {"SASL_SSL", "SSL"})
    void remoteBrokersOverTlsAreNot(String protocol) {
        assertThat(KafkaPreflight.unencryptedWarning(config("kafka-1:9093", Map.of("security.protocol", protocol))))
                .isEmpty();
    }

    @ParameterizedTest
    @ValueSource(strings = {"127.0.0.1:9092", "localhost:9092", "[::1]:9092", "127.0.0.1:9092,localhost:9093"})
    void brokersOnThisHostAreNot(String brokers) {
        assertThat(KafkaPreflight.unencryptedWarning(config(brokers, Map.of()))).isEmpty();
    }

    @Test
    void oneRemoteBrokerAmongLocalOnesIsEnough() {
        assertThat(KafkaPreflight.unencryptedWarning(config("127.0.0.1:9092,kafka-2:9092", Map.of()))).isPresent();
    }

    @Test
    void hostNameVerificationCannotBeTurnedOffWithAnEmptyValue() {
        // an empty value counts as not set, so the Kafka clients keep their default, https
        assertThat(config("kafka-1:9093", Map.of("security.protocol", "SASL_SSL",
                "ssl.endpoint.identification.algorithm", "")).kafkaClientProperties())
                .doesNotContainKey("ssl.endpoint.identification.algorithm");
    }
}
