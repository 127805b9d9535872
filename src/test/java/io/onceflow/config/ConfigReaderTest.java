package io.onceflow.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.InstanceOfAssertFactories.LIST;

import java.util.List;
import java.util.Map;
import java.util.function.Function;
import org.junit.jupiter.api.Test;

class ConfigReaderTest {
    private static final Function<String, String> REJECT_QUOTING_THE_VALUE =
            value -> {
                throw new InvalidValueException("'" + value + "' is wrong", "Fix it.");
            };

    @Test
    void invalidSecretValueIsReportedWithoutQuotingIt() {
        ConfigReader settings =
                new ConfigReader(Map.of("postgres.password", "hunter2"), ValueSubstitution.of(Map.of()), List.of());

        assertThat(settings.parsed(ConfigKey.POSTGRES_PASSWORD, REJECT_QUOTING_THE_VALUE)).isNull();
        assertThatThrownBy(settings::throwIfAnyProblem)
                .isInstanceOf(ConfigException.class)
                .extracting(e -> ((ConfigException) e).problems())
                .isEqualTo(List.of("postgres.password: the value is invalid. Fix it."));
    }

    @Test
    void invalidOtherValueIsQuoted() {
        ConfigReader settings = new ConfigReader(Map.of("postgres.user", "bob"), ValueSubstitution.of(Map.of()), List.of());

        settings.parsed(ConfigKey.POSTGRES_USER, REJECT_QUOTING_THE_VALUE);

        assertThatThrownBy(settings::throwIfAnyProblem)
                .extracting(e -> ((ConfigException) e).problems())
                .isEqualTo(List.of("postgres.user: 'bob' is wrong. Fix it."));
    }

    @Test
    void earlierProblemsComeFirst() {
        ConfigReader settings =
                new ConfigReader(Map.of(), ValueSubstitution.of(Map.of()), List.of("command line: earlier. Fix."));

        settings.text(ConfigKey.INPUT_GROUP_ID);

        assertThatThrownBy(settings::throwIfAnyProblem)
                .extracting(e -> ((ConfigException) e).problems(), LIST)
                .hasSize(2)
                .first()
                .isEqualTo("command line: earlier. Fix.");
    }

    @Test
    void noProblemMeansNoException() {
        ConfigReader settings = new ConfigReader(Map.of("input.group.id", "g"), ValueSubstitution.of(Map.of()), List.of());

        assertThat(settings.text(ConfigKey.INPUT_GROUP_ID)).isEqualTo("g");
        settings.throwIfAnyProblem();
        assertThat(settings.effectiveValues()).containsExactly(Map.entry("input.group.id", "g"));
    }
}
