package io.onceflow.cli;

import java.util.List;
import org.apache.flink.annotation.Internal;

/**
 * A command cannot do its work because a service its configuration names cannot be used: a broker
 * that does not answer, a missing topic, a database that refuses the login. Each problem is one
 * line of the form {@code <key>: <what is wrong>. <what to do>}, names the host, and never contains
 * a secret; the command prints the lines, without a stack trace, and exits with {@link
 * ExitCode#CANNOT_RUN}.
 */
@Internal
public final class CannotRunException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final List<String> problems;

    /**
     * @param problems one line each; must not be empty
     */
    public CannotRunException(List<String> problems) {
        super(String.join("\n", requireSome(problems)));
        this.problems = List.copyOf(problems);
    }

    /** Returns the problems, one line each. */
    public List<String> problems() {
        return problems;
    }

    private static List<String> requireSome(List<String> problems) {
        if (problems.isEmpty()) {
            throw new IllegalArgumentException("a CannotRunException needs at least one problem");
        }
        return problems;
    }
}
