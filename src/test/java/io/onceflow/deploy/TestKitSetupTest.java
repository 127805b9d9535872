package io.onceflow.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * What a team copies to test with the kit (docs/testing-your-processor.md) matches the build: the
 * example project uses the versions of onceflow's pom, the kit's test jar and no JVM flags, and the
 * doc's pom snippet names the same versions.
 */
class TestKitSetupTest {
    private static final Path EXAMPLE_POM = Path.of("examples/payments-ledger/pom.xml");
    private static final Path DOC = Path.of("docs/testing-your-processor.md");
    private static final List<String> SHARED_VERSIONS = List.of("flink.version", "kafka.version", "jackson.version",
            "log4j.version", "junit.version", "assertj.version", "zonky.version", "zonky.binaries.version");

    @Test
    void theExampleUsesTheBuildsVersionsTheKitAndNoJvmFlags() throws Exception {
        Map<String, String> ours = ProjectFiles.pomProperties();
        Map<String, String> example = ProjectFiles.pomProperties(EXAMPLE_POM);
        for (String version : SHARED_VERSIONS) {
            assertThat(example.get(version)).as(version).isEqualTo(ours.get(version));
        }
        assertThat(example.get("onceflow.version")).isEqualTo(ProjectFiles.projectVersion());
        String pom = Files.readString(EXAMPLE_POM);
        assertThat(pom).contains("<classifier>tests</classifier>").doesNotContain("argLine").doesNotContain("--add-")
                .doesNotContain("flink-test-utils");
    }

    @Test
    void theDocsPomSnippetNamesTheBuildsVersions() throws Exception {
        Map<String, String> ours = ProjectFiles.pomProperties();
        String doc = Files.readString(DOC);
        for (String version : List.of("kafka.version", "zonky.version", "zonky.binaries.version")) {
            assertThat(doc).as(version).contains("<version>" + ours.get(version) + "</version>");
        }
    }
}
