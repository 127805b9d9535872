package io.onceflow.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Everything the README and the documents under {@code docs/} point to is in the repository: a user
 * has the clone, not the developers' shared notes.
 */
class DocumentationLinksTest {
    /** A relative Markdown link target, without an anchor. */
    private static final Pattern LINK = Pattern.compile("\\]\\((?!https?:|#)([^)#\\s]+)[^)]*\\)");
    /** A repository path in backticks, e.g. `flink-conf/config.yaml` or `docs/deploy.md`. */
    private static final Pattern QUOTED_PATH = Pattern.compile(
            "`((?:docs|flink-conf|examples|docker|deploy|src)/[A-Za-z0-9_./-]*[A-Za-z0-9_])`");

    @Test
    void everyDocumentReferenceResolvesInsideTheRepository() throws IOException {
        List<String> broken = new ArrayList<>();
        for (Path document : documents()) {
            String text = Files.readString(document);
            assertThat(text).as(document + " refers to the developers' shared folder").doesNotContain("../shared");
            Matcher link = LINK.matcher(text);
            while (link.find()) {
                Path target = document.toAbsolutePath().getParent().resolve(link.group(1)).normalize();
                if (!Files.exists(target)) {
                    broken.add(document + " -> " + link.group(1));
                }
            }
            Matcher quoted = QUOTED_PATH.matcher(text);
            while (quoted.find()) {
                if (!Files.exists(Path.of(quoted.group(1)))) {
                    broken.add(document + " -> `" + quoted.group(1) + "`");
                }
            }
        }
        assertThat(broken).as("references to files that are not in the repository").isEmpty();
    }

    private static List<Path> documents() throws IOException {
        List<Path> documents = new ArrayList<>(List.of(Path.of("README.md")));
        try (Stream<Path> docs = Files.list(Path.of("docs"))) {
            docs.filter(file -> file.toString().endsWith(".md")).sorted().forEach(documents::add);
        }
        return documents;
    }
}
