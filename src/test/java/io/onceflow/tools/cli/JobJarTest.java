package io.onceflow.tools.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.onceflow.cli.ExitCode;
import io.onceflow.config.ConfigException;
import io.onceflow.job.OnceflowJob;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.jar.Attributes;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import java.util.jar.Manifest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code bin/onceflow run --jar JAR}: the jar's main class gets {@code --run-local} and the other
 * arguments, and a jar that does not bring onceflow, or is named twice, is refused before anything
 * runs. (Its classes are on this test's classpath, as {@code bin/onceflow} puts the jar there.)
 */
class JobJarTest {
    @TempDir
    Path directory;

    /** A team's main method: records what it was called with. */
    public static final class RecordingMain {
        static List<String> arguments;

        public static void main(String[] args) {
            arguments = List.of(args);
        }
    }

    private Path jar(String name, String mainClass, boolean bringsOnceflow) throws IOException {
        Manifest manifest = new Manifest();
        manifest.getMainAttributes().put(Attributes.Name.MANIFEST_VERSION, "1.0");
        if (mainClass != null) {
            manifest.getMainAttributes().put(Attributes.Name.MAIN_CLASS, mainClass);
        }
        Path jar = directory.resolve(name);
        try (OutputStream file = Files.newOutputStream(jar); JarOutputStream out = new JarOutputStream(file, manifest)) {
            if (bringsOnceflow) {
                out.putNextEntry(new JarEntry(OnceflowJob.class.getName().replace('.', '/') + ".class"));
                out.closeEntry();
            }
        }
        return jar;
    }

    @Test
    void theJarsMainClassRunsLocallyWithTheOtherArguments() throws Exception {
        Path jar = jar("team-job.jar", RecordingMain.class.getName(), true);

        ExitCode exitCode = OnceflowCli.execute(new String[] {"run", "--config", "job.properties", "--jar", jar.toString(),
            "--parallelism", "1"});

        assertThat(exitCode).isEqualTo(ExitCode.CLEAN);
        assertThat(RecordingMain.arguments).containsExactly("--run-local", "--config", "job.properties", "--parallelism", "1");
    }

    @Test
    void withoutAMainClassOnceflowsJobRunsWithProcessorClass() throws Exception {
        assertThat(JobJar.named(new String[] {"--jar=" + jar("processor-only.jar", null, true)}).orElseThrow().mainClass())
                .isEqualTo(OnceflowJob.class.getName());
        assertThat(JobJar.named(new String[] {"--config", "job.properties"})).isEmpty();
    }

    @Test
    void aJarWithoutOnceflowOrTwoJarsAreRefused() throws Exception {
        Path thin = jar("thin.jar", RecordingMain.class.getName(), false);

        assertThatThrownBy(() -> OnceflowCli.execute(new String[] {"run", "--jar", thin.toString()}))
                .isInstanceOfSatisfying(ConfigException.class, e -> assertThat(e.problems()).containsExactly(
                        "--jar: '" + thin + "' does not bring onceflow. Shade onceflow into the job jar, as"
                                + " examples/payments-ledger/pom.xml does: a Flink cluster has no onceflow of its own."));
        assertThatThrownBy(() -> JobJar.named(new String[] {"--jar", "a.jar", "--jar", "b.jar"}))
                .isInstanceOfSatisfying(ConfigException.class, e -> assertThat(e.problems()).singleElement()
                        .asString().startsWith("--jar: is given more than once"));
        assertThatThrownBy(() -> JobJar.named(new String[] {"--jar", directory.resolve("missing.jar").toString()}))
                .isInstanceOfSatisfying(ConfigException.class, e -> assertThat(e.problems()).singleElement()
                        .asString().startsWith("--jar: cannot read"));
    }
}
