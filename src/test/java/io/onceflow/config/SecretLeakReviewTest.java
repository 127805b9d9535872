package io.onceflow.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.onceflow.preflight.Preflight;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.stream.Stream;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.junit.jupiter.api.Test;

/**
 * Review of issue 34 (adversarial): secrets that reach the Flink web UI (global job parameters),
 * toString and problem lines although the redaction is meant to hide them.
 */
class SecretLeakReviewTest {
    private static final String JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required"
            + " username=\"svc\" password=\"kafka-Pa55\";";
    private static final ValueSubstitution FILES = new ValueSubstitution(Map.of(), ValueSubstitutionTest.files(Map.of(
            "/var/run/secrets/onceflow/postgres-password", "pg-Pa55!w0rd\n",
            "/var/run/secrets/onceflow/kafka-jaas", JAAS + "\n",
            "/var/run/secrets/onceflow/key-passphrase", "assertion-Pa55\n")));

    private static OnceflowConfig config(Map<String, String> settings) {
        return new OnceflowConfig(new ConfigReader(settings, FILES, List.of()));
    }

    /**
     * The Kafka clients themselves mark which of their settings are secrets (type PASSWORD, shown as
     * [hidden] in their own logs). Every one of them, passed as kafka.properties.NAME, must count as
     * secret for onceflow too. Fails: sasl.oauthbearer.assertion.private.key.passphrase (Kafka 4.1+, the
     * passphrase of the OAuth client-assertion private key) matches none of Secrets' key parts.
     */
    @Test
    void everyKafkaClientPasswordSettingIsASecretKey() {
        TreeSet<String> notRecognised = new TreeSet<>();
        Stream.of(ProducerConfig.configDef(), ConsumerConfig.configDef(), AdminClientConfig.configDef())
                .flatMap(definition -> definition.configKeys().values().stream())
                .filter(key -> key.type == ConfigDef.Type.PASSWORD)
                // PASSWORD-typed for Kafka's own reasons, but a CA certificate is public
                .filter(key -> !key.name.equals("ssl.truststore.certificates"))
                .map(key -> ConfigKey.KAFKA_PROPERTIES_PREFIX + key.name)
                .filter(key -> !Secrets.isSecretKey(key))
                .forEach(notRecognised::add);

        assertThat(notRecognised).as("Kafka PASSWORD-type settings that onceflow shows in clear").isEmpty();
    }

    /** The consequence of the above: the passphrase, read from a mounted Secret file, is a global job parameter. */
    @Test
    void theOauthAssertionKeyPassphraseReachesTheJobParametersAndProblemLines() {
        Map<String, String> settings = ValidSettings.required();
        settings.put("kafka.properties.sasl.oauthbearer.assertion.private.key.passphrase",
                "${file:/var/run/secrets/onceflow/key-passphrase}");
        OnceflowConfig config = config(settings);

        assertThat(config.toJobParameters().toMap().toString()).doesNotContain("assertion-Pa55");
        assertThat(config.toString()).doesNotContain("assertion-Pa55");
        assertThat(Preflight.withoutSecrets("the client said: bad passphrase assertion-Pa55", config))
                .doesNotContain("assertion-Pa55");
    }

    /**
     * Redaction is by key name only, so a value read from a Secret file is shown whenever the key naming
     * it is not a secret key: here a one-letter typo in a pass-through key (kafka.properties.* accepts
     * any name, so the typo is not reported) puts the whole JAAS line, password included, into the
     * global job parameters that Flink's web UI shows.
     */
    @Test
    void aSecretFileUnderAMistypedPassThroughKeyIsShownInTheJobParameters() {
        Map<String, String> settings = ValidSettings.required();
        settings.put("kafka.properties.sasl.jaas.confg", "${file:/var/run/secrets/onceflow/kafka-jaas}");
        OnceflowConfig config = config(settings);

        assertThat(config.toJobParameters().toMap().toString()).doesNotContain("kafka-Pa55");
    }

    /**
     * The same by a swapped reference: a Secret file named by a validated non-secret key is quoted in the
     * problem line printed on the console.
     */
    @Test
    void aSecretFileUnderAValidatedNonSecretKeyIsQuotedInTheProblemLine() {
        Map<String, String> settings = ValidSettings.required();
        settings.put("dead.letter.topic", "${file:/var/run/secrets/onceflow/postgres-password}");

        assertThatThrownBy(() -> config(settings)).isInstanceOf(ConfigException.class)
                .message().doesNotContain("pg-Pa55!w0rd");
    }
}
