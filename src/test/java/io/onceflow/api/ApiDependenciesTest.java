package io.onceflow.api;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * {@code io.onceflow.api} is what a team's processor compiles against: it names no other package of
 * onceflow, in code or in javadoc, so that it can never pull the job's internals (and their cycles)
 * into a team's code. The entry point that wires a job, {@code io.onceflow.job.Onceflow}, lives with
 * the job.
 */
class ApiDependenciesTest {
    private static final Path API = Path.of("src/main/java/io/onceflow/api");
    private static final Pattern OTHER_PACKAGE = Pattern.compile("io\\.onceflow\\.(?!api\\b)[a-z]\\w*");

    @Test
    void theApiPackageNamesNoOtherPackageOfOnceflow() throws IOException {
        List<String> references;
        try (Stream<Path> sources = Files.list(API)) {
            references = sources.filter(file -> file.toString().endsWith(".java"))
                    .flatMap(ApiDependenciesTest::otherPackagesNamed)
                    .toList();
        }
        assertThat(references).isEmpty();
    }

    private static Stream<String> otherPackagesNamed(Path source) {
        try {
            Matcher named = OTHER_PACKAGE.matcher(Files.readString(source));
            Stream.Builder<String> found = Stream.builder();
            while (named.find()) {
                found.add(source.getFileName() + ": " + named.group());
            }
            return found.build();
        } catch (IOException e) {
            throw new IllegalStateException("cannot read " + source, e);
        }
    }
}
