package io.onceflow.config;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Map;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/** The commented sample {@code examples/job.properties} that the README and docs/deploy.md point to. */
class SampleJobPropertiesTest {
    private static final Path SAMPLE = Path.of("examples", "job.properties");

    @Test
    void theSampleIsAValidConfigurationOnceItsVariablesAreSet() {
        OnceflowConfig config = OnceflowConfig.fromArgs(new String[] {"--config", SAMPLE.toString()},
                Map.of("ONCEFLOW_POSTGRES_PASSWORD", "from-the-environment"));

        assertThat(config.postgres().orElseThrow().password()).isEqualTo("from-the-environment");
        assertThat(config.redactedMap().toString()).doesNotContain("from-the-environment");
    }

    @Test
    void everyKeyIsInTheSampleSetOrCommentedOut() throws IOException {
        String sample = Files.readString(SAMPLE);

        assertThat(Arrays.stream(ConfigKey.values()).map(ConfigKey::key))
                .as("keys missing from " + SAMPLE + ": add each, commented out with its default and a description")
                .allMatch(key -> Pattern.compile("(?m)^#?" + Pattern.quote(key) + " = ").matcher(sample).find());
    }

    @Test
    void everyCommentedOutDefaultIsTheRealDefault() throws IOException {
        for (ConfigKey key : ConfigKey.values()) {
            var commented = Pattern.compile("(?m)^#" + Pattern.quote(key.key()) + " = (.*)$").matcher(Files.readString(SAMPLE));
            if (commented.find() && key.defaultValue() != null) {
                assertThat(commented.group(1)).as("default of " + key.key() + " in " + SAMPLE).isEqualTo(key.defaultValue());
            }
        }
    }
}
