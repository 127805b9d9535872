package io.onceflow.config;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** The README's settings reference is what {@code --help} prints, so neither drifts from the other. */
class ReadmeReferenceTest {
    @Test
    void theReadmeListsEverySettingAsHelpPrintsIt() throws IOException {
        String usage = OnceflowConfig.usage();
        String keyReference = usage.substring(usage.indexOf("  " + ConfigKey.values()[0].key() + " ("));

        assertThat(Files.readString(Path.of("README.md")))
                .as("README.md's settings reference: paste the key list that --help prints")
                .contains("```text\n" + keyReference.stripTrailing() + "\n```");
    }
}
