package io.onceflow.config;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.StandardCharsets;
import java.nio.file.AccessDeniedException;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Replaces references in configuration values, so that secrets need not be written into arguments
 * or files: {@code ${NAME}} and {@code ${NAME:-default}} by environment variables, {@code
 * ${file:/absolute/path}} by the content of that file (a Kubernetes Secret mounted as files).
 *
 * <p>As in the shell, the default is used when the variable is unset or empty. A file's content is
 * read as UTF-8 and loses one trailing line break, which {@code kubectl create secret --from-file}
 * and editors leave. Other {@code ${...}} text, such as a Kafka config-provider reference {@code
 * ${file:/etc/kafka.properties:pw}} (a path with a key), is left as it is for the Kafka client.
 * Replacements are taken literally: a {@code ${...}} inside a variable or a file stays as it is.
 */
final class ValueSubstitution {
    /** A secret is a line or a few; anything larger is a wrong path (a keystore, a log). */
    static final int MAX_FILE_BYTES = 1024 * 1024;

    private static final Pattern REFERENCE =
            Pattern.compile(
                    "\\$\\{file:(?<path>/[^}:]*)}"
                            + "|\\$\\{(?<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?<default>[^}]*))?}");

    /** Opens the file a {@code ${file:PATH}} names; tests give their own. */
    @FunctionalInterface
    interface FileOpener {
        InputStream open(Path path) throws IOException;
    }

    /** The files of this machine. */
    static final FileOpener LOCAL_FILES =
            path -> {
                // opening a directory succeeds on Linux and fails only at the read, less clearly
                if (Files.isDirectory(path)) {
                    throw new FileSystemException(path.toString(), null, "it is a directory");
                }
                return Files.newInputStream(path);
            };

    /** A reference that could not be resolved: what is wrong and what to do, never a value. */
    record Problem(String whatIsWrong, String whatToDo) {}

    /**
     * The substituted text, the references in it that could not be resolved, and whether it took
     * anything from a file (which makes the value a secret, whatever its key: see {@link Secrets}).
     */
    record Result(String value, List<Problem> problems, boolean fromFile) {}

    private final Map<String, String> environment;
    private final FileOpener files;

    ValueSubstitution(Map<String, String> environment, FileOpener files) {
        this.environment = environment;
        this.files = files;
    }

    /** Substitutes from {@code environment} and the files of this machine. */
    static ValueSubstitution of(Map<String, String> environment) {
        return new ValueSubstitution(environment, LOCAL_FILES);
    }

    Result substitute(String text) {
        List<Problem> problems = new ArrayList<>();
        Matcher reference = REFERENCE.matcher(text);
        StringBuilder value = new StringBuilder();
        boolean fromFile = false;
        while (reference.find()) {
            String path = reference.group("path");
            fromFile |= path != null;
            String resolved = path != null ? fileContent(path, problems) : variable(reference, problems);
            reference.appendReplacement(value, Matcher.quoteReplacement(resolved));
        }
        reference.appendTail(value);
        return new Result(value.toString(), List.copyOf(problems), fromFile);
    }

    private String variable(Matcher reference, List<Problem> problems) {
        String name = reference.group("name");
        String defaultValue = reference.group("default");
        String fromEnvironment = environment.get(name);
        if (defaultValue != null && (fromEnvironment == null || fromEnvironment.isEmpty())) {
            return defaultValue;
        }
        if (fromEnvironment == null) {
            problems.add(
                    new Problem(
                            "refers to the environment variable " + name + ", which is not set",
                            "Set " + name + ", or give a default as ${" + name + ":-default}."));
            return "";
        }
        return fromEnvironment;
    }

    private String fileContent(String path, List<Problem> problems) {
        String where =
                " where the job's main method runs (the machine of flink run, or the JobManager"
                        + " for an application-mode or REST submission)";
        String wrong = "refers to the file " + path + ", which ";
        try (InputStream in = files.open(Path.of(path))) {
            byte[] bytes = in.readNBytes(MAX_FILE_BYTES + 1);
            if (bytes.length > MAX_FILE_BYTES) {
                problems.add(
                        new Problem(
                                wrong + "is larger than 1 MiB",
                                "Name the file that holds only the value, e.g. one key of a"
                                        + " mounted Secret."));
                return "";
            }
            return withoutOneTrailingLineBreak(
                    StandardCharsets.UTF_8.newDecoder().decode(ByteBuffer.wrap(bytes)).toString());
        } catch (NoSuchFileException e) {
            problems.add(
                    new Problem(
                            wrong + "does not exist",
                            "Mount or create it" + where + ", or correct the path."));
        } catch (AccessDeniedException e) {
            problems.add(
                    new Problem(
                            wrong + "this process may not read",
                            "Let the user the job runs as read it (on Kubernetes: the pod's"
                                    + " securityContext.fsGroup)."));
        } catch (CharacterCodingException e) {
            problems.add(
                    new Problem(
                            wrong + "is not UTF-8 text",
                            "Name a text file; a binary file such as a keystore goes to a"
                                    + " *.location setting instead."));
        } catch (IOException e) {
            // the reason of a file-system error names the file and the cause, never its content
            String reason =
                    e instanceof FileSystemException fileError && fileError.getReason() != null
                            ? fileError.getReason()
                            : Objects.requireNonNullElse(e.getMessage(), e.getClass().getSimpleName());
            problems.add(
                    new Problem(
                            wrong + "cannot be read (" + reason + ")",
                            "Name a readable file" + where + ": for a Secret mounted as a"
                                    + " directory, the file of one key, <mount path>/<key>."));
        }
        return "";
    }

    private static String withoutOneTrailingLineBreak(String content) {
        if (content.endsWith("\r\n")) {
            return content.substring(0, content.length() - 2);
        }
        return content.endsWith("\n") ? content.substring(0, content.length() - 1) : content;
    }
}
