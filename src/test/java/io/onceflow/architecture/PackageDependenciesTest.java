package io.onceflow.architecture;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The packages of {@code src/main} as the code names them (imports, qualified names and javadoc
 * links alike): no package reaches itself again through others, and two leaves name no other
 * package of onceflow. {@code io.onceflow.api} is what a team's processor compiles against, so it
 * can never pull the job's internals into a team's code; {@code io.onceflow.sink.postgres.options}
 * holds the settings that both the PostgreSQL sink's public face and its internals read, which is
 * what keeps the two from importing each other.
 */
class PackageDependenciesTest {
    private static final Path MAIN = Path.of("src/main/java");
    private static final Pattern PACKAGE = Pattern.compile("^package ([\\w.]+);", Pattern.MULTILINE);
    /** A package of onceflow named in code: lower-case segments, then a type (upper case). */
    private static final Pattern NAMED = Pattern.compile("\\b(io\\.onceflow(?:\\.[a-z]\\w*)+)\\.[A-Z]");

    @Test
    void noPackageOfOnceflowReachesItselfThroughOthers() {
        Map<String, Set<String>> named = namedPackages();
        List<String> cycles = new ArrayList<>();
        for (String start : named.keySet()) {
            List<String> cycle = cycleThrough(start, named);
            if (!cycle.isEmpty() && cycle.get(0).equals(cycle.stream().sorted().findFirst().orElseThrow())) {
                cycles.add(String.join(" -> ", cycle) + " -> " + start);
            }
        }
        assertThat(cycles).as("package cycles (each from its first package in name order)").isEmpty();
    }

    @Test
    void theApiPackageNamesNoOtherPackageOfOnceflow() {
        assertThat(namedPackages().get("io.onceflow.api")).isEmpty();
    }

    @Test
    void thePostgresSinkOptionsNameNoOtherPackageOfOnceflow() {
        assertThat(namedPackages().get("io.onceflow.sink.postgres.options")).isEmpty();
    }

    @Test
    void theCycleFinderFindsACycle() {
        Map<String, Set<String>> named = Map.of("a", Set.of("b"), "b", Set.of("c"), "c", Set.of("a"), "d", Set.of("a"));
        assertThat(cycleThrough("a", named)).containsExactly("a", "b", "c");
        assertThat(cycleThrough("d", named)).isEmpty();
    }

    /** A path from {@code start} back to it (without repeating {@code start} at the end), or empty. */
    static List<String> cycleThrough(String start, Map<String, Set<String>> named) {
        Deque<List<String>> paths = new ArrayDeque<>();
        paths.add(List.of(start));
        Set<String> seen = new TreeSet<>();
        while (!paths.isEmpty()) {
            List<String> path = paths.poll();
            for (String next : named.getOrDefault(path.get(path.size() - 1), Set.of())) {
                if (next.equals(start)) {
                    return path;
                }
                if (seen.add(next)) {
                    List<String> longer = new ArrayList<>(path);
                    longer.add(next);
                    paths.add(longer);
                }
            }
        }
        return List.of();
    }

    /** Each package of {@code src/main} and the other packages of onceflow its files name. */
    private static Map<String, Set<String>> namedPackages() {
        Map<String, Set<String>> named = new TreeMap<>();
        try (Stream<Path> files = Files.walk(MAIN)) {
            files.filter(file -> file.toString().endsWith(".java")).forEach(file -> {
                String source = read(file);
                Matcher declared = PACKAGE.matcher(source);
                if (!declared.find()) {
                    return;
                }
                String own = declared.group(1);
                Set<String> others = named.computeIfAbsent(own, p -> new TreeSet<>());
                Matcher reference = NAMED.matcher(source);
                while (reference.find()) {
                    if (!reference.group(1).equals(own)) {
                        others.add(reference.group(1));
                    }
                }
            });
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return named;
    }

    private static String read(Path file) {
        try {
            return Files.readString(file);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
