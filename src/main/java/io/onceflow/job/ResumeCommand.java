package io.onceflow.job;

import io.onceflow.cli.ShellWords;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.config.Secrets;
import io.onceflow.preflight.Preflight;
import java.net.URISyntaxException;
import java.nio.file.Path;
import java.security.CodeSource;
import java.util.Arrays;
import java.util.stream.Collectors;
import org.apache.flink.annotation.Internal;

/**
 * The command that resumes this job from a retained checkpoint, for the fresh-start refusal to
 * print: {@code flink run -s <checkpoint> <the job's jar> <the arguments it was started with>}, with
 * every secret value {@link Secrets#REDACTED}. {@link #UNKNOWN} names the jar and arguments by
 * placeholders, where the job was not started from a command line (a test, a tool).
 *
 * @param jar the jar (or class directory) the main class came from
 * @param arguments the arguments, quoted for a POSIX shell, secrets redacted
 */
@Internal
public record ResumeCommand(String jar, String arguments) {
    public static final ResumeCommand UNKNOWN = new ResumeCommand("<job jar>", "<the same arguments>");

    /**
     * The command for a job whose {@code main} ran in {@code mainClass} with {@code args}.
     *
     * @param config the configuration the arguments gave, whose secret values are redacted
     */
    public static ResumeCommand of(Class<?> mainClass, String[] args, OnceflowConfig config) {
        // redacted before quoting: quoting rewrites a secret holding ' into text no longer equal to it
        String arguments = Arrays.stream(args).map(argument -> ShellWords.quoted(Preflight.withoutSecrets(argument, config)))
                .collect(Collectors.joining(" "));
        return new ResumeCommand(jarOf(mainClass), arguments);
    }

    /** {@code flink run -s <checkpoint> <jar> <arguments>}, saying so when secrets were left out. */
    public String flinkRunFrom(String checkpoint) {
        String command = "flink run -s " + checkpoint + " " + jar + (arguments.isEmpty() ? "" : " " + arguments);
        return arguments.contains(Secrets.REDACTED) ? command + " (give the " + Secrets.REDACTED + " secrets as before)"
                : command;
    }

    private static String jarOf(Class<?> mainClass) {
        CodeSource source = mainClass.getProtectionDomain().getCodeSource();
        if (source == null || source.getLocation() == null) {
            return UNKNOWN.jar();
        }
        try {
            return ShellWords.quoted(Path.of(source.getLocation().toURI()).toString());
        } catch (URISyntaxException | IllegalArgumentException e) {
            return UNKNOWN.jar();
        }
    }
}
