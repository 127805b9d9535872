package io.onceflow.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * {@code .ci/quickstart} runs the README's quick start as written: every command of the README's
 * "Your own job" block but {@code flink run} (no cluster in CI) is a line of the script marked
 * {@code # README}, followed by nothing but redirections and {@code &}, and every line so marked is one
 * of those commands.
 */
class QuickStartScriptTest {
    private static final Path README = Path.of("README.md");
    private static final Path SCRIPT = Path.of(".ci/quickstart");
    private static final String MARK = "# README";
    /** What the script may add after a README command: its output to a file, into the background. */
    private static final Pattern SCRIPT_ADDITIONS = Pattern.compile("( > \"[^\"]*\"| 2>&1| &)* " + Pattern.quote(MARK));

    /** The commands of the README's quick start, each without its trailing comment. */
    private static List<String> readmeCommands() throws IOException {
        String readme = Files.readString(README);
        int section = readme.indexOf("\n## Your own job\n");
        assertThat(section).as("the README's section \"Your own job\"").isPositive();
        int block = readme.indexOf("```bash\n", section) + "```bash\n".length();
        return readme.substring(block, readme.indexOf("```", block)).lines()
                .map(line -> line.replaceFirst("\\s+# .*$", "").strip())
                .filter(command -> !command.isEmpty())
                .toList();
    }

    private static List<String> markedScriptLines() throws IOException {
        return Files.readAllLines(SCRIPT).stream().map(String::strip).filter(line -> line.endsWith(MARK)).toList();
    }

    @Test
    void theScriptRunsEveryCommandOfTheQuickStartButFlinkRun() throws IOException {
        List<String> commands = readmeCommands();
        List<String> marked = markedScriptLines();

        assertThat(commands).as("the quick start's commands").hasSizeGreaterThanOrEqualTo(5)
                .last().asString().startsWith("flink run ");
        for (String command : commands.subList(0, commands.size() - 1)) {
            assertThat(marked).as("a line of .ci/quickstart running: " + command).anySatisfy(line ->
                    assertThat(line.startsWith(command)
                            && SCRIPT_ADDITIONS.matcher(line.substring(command.length())).matches()).isTrue());
        }
        for (String line : marked) {
            assertThat(commands).as("the README command that this line of .ci/quickstart runs: " + line)
                    .anySatisfy(command -> assertThat(line).startsWith(command));
        }
    }
}
