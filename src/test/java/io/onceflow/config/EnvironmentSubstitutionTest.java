package io.onceflow.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.InstanceOfAssertFactories.STRING;

import java.util.Map;
import org.junit.jupiter.api.Test;

class EnvironmentSubstitutionTest {
    private static EnvironmentSubstitution.Result substitute(
            String text, Map<String, String> environment) {
        return EnvironmentSubstitution.substitute(text, environment);
    }

    @Test
    void definedVariablesAreReplacedAnywhereInTheValue() {
        var result =
                substitute(
                        "kafka-${ENVIRONMENT}-${REGION}:9092",
                        Map.of("ENVIRONMENT", "prod", "REGION", "eu"));

        assertThat(result.value()).isEqualTo("kafka-prod-eu:9092");
        assertThat(result.undefinedVariables()).isEmpty();
    }

    @Test
    void defaultIsUsedWhenTheVariableIsUnsetOrEmpty() {
        assertThat(substitute("${PORT:-9092}", Map.of()).value()).isEqualTo("9092");
        assertThat(substitute("${PORT:-9092}", Map.of("PORT", "")).value()).isEqualTo("9092");
        assertThat(substitute("${PORT:-9092}", Map.of("PORT", "9093")).value()).isEqualTo("9093");
        assertThat(substitute("${PORT:-}", Map.of()).value()).isEmpty();
    }

    @Test
    void undefinedVariableWithoutDefaultIsNamed() {
        var result = substitute("${USER_NAME}:${PASSWORD}", Map.of("USER_NAME", "svc"));

        assertThat(result.undefinedVariables()).containsExactly("PASSWORD");
    }

    @Test
    void setButEmptyVariableWithoutDefaultIsEmpty() {
        var result = substitute("a${EMPTY}b", Map.of("EMPTY", ""));

        assertThat(result.value()).isEqualTo("ab");
        assertThat(result.undefinedVariables()).isEmpty();
    }

    @Test
    void replacementTextIsTakenLiterally() {
        assertThat(substitute("${PASSWORD}", Map.of("PASSWORD", "a$1\\b${X}")).value())
                .isEqualTo("a$1\\b${X}");
    }

    @Test
    void kafkaConfigProviderReferencesAreLeftForKafka() {
        String reference = "${file:/etc/kafka/secrets.properties:truststore.password}";

        assertThat(substitute(reference, Map.of()).value()).isEqualTo(reference);
    }

    @Test
    void substitutedValuesAreValidatedAndUsed() {
        var settings = ValidSettings.required();
        settings.put("kafka.bootstrap.servers", "${KAFKA_HOST}:${KAFKA_PORT:-9092}");
        settings.put("parallelism", "${PARALLELISM:-}");

        OnceflowConfig config =
                OnceflowConfig.fromMap(settings, Map.of("KAFKA_HOST", "broker.internal"));

        assertThat(config.bootstrapServers()).isEqualTo("broker.internal:9092");
        assertThat(config.parallelism()).isEmpty();
    }

    @Test
    void undefinedVariableIsAProblemNamingKeyAndVariable() {
        var settings = ValidSettings.withPostgres("${PGPASSWORD}");

        assertThat(ConfigProblems.of(settings))
                .containsExactly(
                        "postgres.password: refers to the environment variable PGPASSWORD, which"
                                + " is not set. Set PGPASSWORD, or give a default as"
                                + " ${PGPASSWORD:-default}.");
    }

    @Test
    void undefinedVariableInARequiredKeyIsNotAlsoReportedAsMissing() {
        var settings = ValidSettings.required();
        settings.put("input.group.id", "${GROUP}");

        assertThat(ConfigProblems.of(settings))
                .singleElement(STRING)
                .startsWith("input.group.id: refers to the environment variable GROUP");
    }
}
