package io.onceflow.config;

import java.util.List;

/**
 * The configuration is invalid. Carries every problem found, so that one run reports them all.
 *
 * <p>Each problem reads {@code <key>: <what is wrong>. <what to do>} and never contains the value
 * of a secret key.
 */
public final class ConfigException extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;

    private final List<String> problems;

    /**
     * Creates an exception listing the given problems.
     *
     * @param problems the problems found, in the order found; must not be empty
     */
    public ConfigException(List<String> problems) {
        super(message(problems));
        this.problems = List.copyOf(problems);
    }

    /**
     * Returns the problems found.
     *
     * @return every problem, each of the form {@code <key>: <what is wrong>. <what to do>}
     */
    public List<String> problems() {
        return problems;
    }

    /**
     * Formats one problem as {@code <key>: <what is wrong>. <what to do>}, the form of every
     * problem onceflow reports, also outside the configuration (e.g. an unreachable service).
     *
     * @param key the configuration key (or command-line option) to change
     * @param whatIsWrong no final period (but may end with a question mark); never a secret
     * @param whatToDo ends with a period
     * @return the problem as one line
     */
    public static String problem(String key, String whatIsWrong, String whatToDo) {
        String separator = whatIsWrong.endsWith("?") ? " " : ". ";
        return key + ": " + whatIsWrong + separator + whatToDo;
    }

    private static String message(List<String> problems) {
        if (problems.isEmpty()) {
            throw new IllegalArgumentException("a ConfigException needs at least one problem");
        }
        String count = problems.size() == 1 ? "1 problem" : problems.size() + " problems";
        return "Invalid onceflow configuration (" + count + "):\n  " + String.join("\n  ", problems);
    }
}
