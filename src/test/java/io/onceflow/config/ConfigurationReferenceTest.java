package io.onceflow.config;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/**
 * The settings reference in {@code docs/configuration.md} is what {@code --help} prints, so neither
 * drifts from the other. Run with {@code -Donceflow.regenerate-docs=true} to rewrite the document's
 * block from the code, then check the diff.
 */
class ConfigurationReferenceTest {
    private static final Path DOCUMENT = Path.of("docs", "configuration.md");
    private static final String REGENERATE = "onceflow.regenerate-docs";

    @Test
    void theConfigurationDocumentListsEverySettingAsHelpPrintsIt() throws IOException {
        String block = "```text\n" + keyReference().stripTrailing() + "\n```";
        if (Boolean.getBoolean(REGENERATE)) {
            Files.writeString(DOCUMENT, withBlockReplaced(Files.readString(DOCUMENT), block));
        }

        assertThat(Files.readString(DOCUMENT))
                .as(DOCUMENT + "'s settings reference differs from what --help prints. Regenerate it:"
                        + " mvn -q test -Dtest=ConfigurationReferenceTest -D" + REGENERATE + "=true")
                .contains(block);
    }

    /** The key list that {@code --help} prints after the command's own options. */
    private static String keyReference() {
        String usage = OnceflowConfig.usage();
        return usage.substring(usage.indexOf("  " + ConfigKey.values()[0].key() + " ("));
    }

    /** {@code document} with its settings block (the text block that starts with the first key) replaced. */
    private static String withBlockReplaced(String document, String block) {
        int start = document.indexOf("```text\n  " + ConfigKey.values()[0].key() + " (");
        if (start < 0) {
            throw new IllegalStateException(DOCUMENT + " has no settings block starting with the first key to replace");
        }
        int end = document.indexOf("\n```", start + "```text\n".length()) + "\n```".length();
        return document.substring(0, start) + block + document.substring(end);
    }
}
