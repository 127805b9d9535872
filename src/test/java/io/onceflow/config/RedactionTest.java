package io.onceflow.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import java.util.Map;
import org.apache.flink.configuration.Configuration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.ValueSource;

class RedactionTest {
    private static final String PASSWORD = "pg-Pa55-w0rd";
    private static final String JAAS_CONFIG =
            "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"svc\""
                    + " password=\"kafka-Pa55\";";

    /** Where the secrets come from: the same redaction applies to both. */
    enum Source {
        ENVIRONMENT("${PGPASSWORD}", JAAS_CONFIG, "${TRUSTSTORE_PASSWORD}"),
        FILES("${file:/var/run/secrets/onceflow/postgres-password}", "${file:/var/run/secrets/onceflow/kafka-jaas}",
                "${file:/var/run/secrets/onceflow/truststore-password}");

        private final String password;
        private final String jaasConfig;
        private final String truststorePassword;

        Source(String password, String jaasConfig, String truststorePassword) {
            this.password = password;
            this.jaasConfig = jaasConfig;
            this.truststorePassword = truststorePassword;
        }

        Map<String, String> settingsWithSecrets() {
            Map<String, String> settings = ValidSettings.withPostgres(password);
            settings.put("kafka.properties.sasl.jaas.config", jaasConfig);
            settings.put("kafka.properties.ssl.truststore.password", truststorePassword);
            settings.put("kafka.properties.security.protocol", "SASL_SSL");
            return settings;
        }

        OnceflowConfig config(Map<String, String> settings) {
            return new OnceflowConfig(new ConfigReader(settings, SUBSTITUTION, List.of()));
        }
    }

    /** The secrets as environment variables and as files (a Kubernetes Secret mounted as files, with line breaks). */
    private static final ValueSubstitution SUBSTITUTION = new ValueSubstitution(
            Map.of("PGPASSWORD", PASSWORD, "TRUSTSTORE_PASSWORD", "trust-Pa55"),
            ValueSubstitutionTest.files(Map.of(
                    "/var/run/secrets/onceflow/postgres-password", PASSWORD + "\n",
                    "/var/run/secrets/onceflow/kafka-jaas", JAAS_CONFIG + "\n",
                    "/var/run/secrets/onceflow/truststore-password", "trust-Pa55")));

    @ParameterizedTest
    @ValueSource(
            strings = {
                "postgres.password",
                "kafka.properties.ssl.truststore.password",
                "kafka.properties.ssl.keystore.password",
                "kafka.properties.ssl.key.password",
                "kafka.properties.sasl.jaas.config",
                "kafka.properties.sasl.oauthbearer.token.endpoint.url",
                "kafka.properties.client.secret",
                "kafka.properties.SASL.JAAS.CONFIG",
                "kafka.properties.aws.credentials.file"
            })
    void secretKeysAreRecognised(String key) {
        assertThat(Secrets.isSecretKey(key)).isTrue();
    }

    @ParameterizedTest
    @ValueSource(
            strings = {"postgres.user", "postgres.url", "kafka.properties.security.protocol",
                "kafka.properties.sasl.mechanism", "kafka.properties.ssl.truststore.location",
                "kafka.transactional.id.prefix"})
    void otherKeysAreNotSecret(String key) {
        assertThat(Secrets.isSecretKey(key)).isFalse();
    }

    @Test
    void redactReplacesOnlySecretValuesAndSortsByKey() {
        var redacted = Secrets.redact(Map.of("b.password", "x", "a.user", "y"));

        assertThat(redacted)
                .containsExactly(Map.entry("a.user", "y"), Map.entry("b.password", "******"));
    }

    @ParameterizedTest
    @EnumSource(Source.class)
    void secretsReachTheJobButAreRedactedInRedactedMap(Source source) {
        OnceflowConfig config = source.config(source.settingsWithSecrets());

        assertThat(config.postgres().orElseThrow().password()).isEqualTo(PASSWORD);
        assertThat(config.kafkaClientProperties())
                .containsEntry("sasl.jaas.config", JAAS_CONFIG)
                .containsEntry("ssl.truststore.password", "trust-Pa55");
        assertThat(config.redactedMap())
                .containsEntry("postgres.password", Secrets.REDACTED)
                .containsEntry("kafka.properties.sasl.jaas.config", Secrets.REDACTED)
                .containsEntry("kafka.properties.ssl.truststore.password", Secrets.REDACTED)
                .containsEntry("kafka.properties.security.protocol", "SASL_SSL")
                .containsEntry("postgres.user", "onceflow");
        assertNoSecretIn(config.redactedMap().toString());
    }

    @ParameterizedTest
    @EnumSource(Source.class)
    void redactedMapHoldsEveryEffectiveSettingIncludingDefaultsSortedByKey(Source source) {
        OnceflowConfig config = source.config(source.settingsWithSecrets());

        assertThat(List.copyOf(config.redactedMap().keySet()))
                .isSorted()
                .contains(
                        "dedup.ttl",
                        "checkpoint.interval",
                        "state.backend",
                        "postgres.table",
                        "postgres.sink.prefix")
                .doesNotContain("parallelism", "checkpoint.dir");
        assertThat(config.redactedMap())
                .containsEntry("dedup.ttl", "7d")
                .containsEntry("postgres.sink.prefix", "payments_pg")
                .containsEntry("message.id.source", "header:message-id");
    }

    @ParameterizedTest
    @EnumSource(Source.class)
    void toStringShowsSettingsButNoSecret(Source source) {
        OnceflowConfig config = source.config(source.settingsWithSecrets());

        assertThat(config.toString())
                .startsWith("OnceflowConfig{")
                .contains("input.topics=payments,refunds")
                .contains("postgres.password=******");
        assertNoSecretIn(config.toString());
    }

    @ParameterizedTest
    @EnumSource(Source.class)
    void postgresSettingsToStringRedactsThePassword(Source source) {
        OnceflowConfig config = source.config(source.settingsWithSecrets());

        assertThat(config.postgres().orElseThrow().toString())
                .contains("user=onceflow")
                .contains("password=******")
                .doesNotContain(PASSWORD);
    }

    @ParameterizedTest
    @EnumSource(Source.class)
    void jobParametersAreTheRedactedSettings(Source source) {
        OnceflowConfig config = source.config(source.settingsWithSecrets());

        Configuration parameters = config.toJobParameters();

        assertThat(parameters.toMap()).isEqualTo(config.redactedMap());
        assertNoSecretIn(parameters.toMap().toString());
    }

    @ParameterizedTest
    @EnumSource(Source.class)
    void problemsNeverShowASecretValue(Source source) {
        Map<String, String> settings = source.settingsWithSecrets();
        // the password's reference, in keys whose problems are reported
        String secret = source.settingsWithSecrets().get("postgres.password");
        settings.put("postgres.url", "jdbc:postgresql://db/payments?password=" + secret);
        settings.put("postgres.passwrd", secret);
        settings.put("kafka.properties.transactional.id", secret);

        assertThatThrownBy(() -> source.config(settings))
                .isInstanceOf(ConfigException.class)
                .satisfies(
                        e -> {
                            assertThat(((ConfigException) e).problems()).hasSize(3);
                            assertNoSecretIn(e.getMessage());
                            assertThat(e.getMessage())
                                    .contains("postgres.url: contains a password")
                                    .contains("postgres.passwrd: unknown key")
                                    .contains("kafka.properties.transactional.id: is derived");
                        });
    }

    private static void assertNoSecretIn(String text) {
        assertThat(text)
                .doesNotContain(PASSWORD)
                .doesNotContain("kafka-Pa55")
                .doesNotContain("trust-Pa55");
    }

    @ParameterizedTest
    @ValueSource(strings = {
        "jdbc:postgresql://bob:" + PASSWORD + "@db:5432/payments",
        "jdbc:postgresql://bob:" + PASSWORD + "@db1,db2/payments?ssl=true",
        "postgresql://bob:" + PASSWORD + "@db/payments"})
    void userInformationInThePostgresUrlIsRefusedWithoutQuotingIt(String url) {
        Map<String, String> settings = Source.ENVIRONMENT.settingsWithSecrets();
        settings.put("postgres.url", url);

        assertThatThrownBy(() -> Source.ENVIRONMENT.config(settings))
                .isInstanceOf(ConfigException.class)
                .satisfies(e -> {
                    assertThat(((ConfigException) e).problems()).containsExactly(
                            "postgres.url: contains user information (user:password@host). Remove it from the URL and"
                                    + " set postgres.user and postgres.password (e.g. to ${PGPASSWORD}), which is"
                                    + " never shown.");
                    assertNoSecretIn(e.getMessage());
                });
    }

    @Test
    void anAtSignAfterTheHostIsNotUserInformation() {
        Map<String, String> settings = Source.ENVIRONMENT.settingsWithSecrets();
        settings.put("postgres.url", "jdbc:postgresql://db:5432/payments?options=-c%20search_path=a@b");

        assertThat(Source.ENVIRONMENT.config(settings).postgres()).isPresent();
    }
}
