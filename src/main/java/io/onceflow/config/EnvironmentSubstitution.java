package io.onceflow.config;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Replaces {@code ${NAME}} and {@code ${NAME:-default}} in configuration values with environment
 * variables, so that secrets need not be written into arguments or files.
 *
 * <p>As in the shell, the default is used when the variable is unset or empty. Other {@code
 * ${...}} text, such as a Kafka config-provider reference {@code ${file:/etc/kafka.properties:pw}},
 * is left as it is for the Kafka client to resolve.
 */
final class EnvironmentSubstitution {
    private static final Pattern REFERENCE =
            Pattern.compile("\\$\\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?}");

    /**
     * The substituted text and the variables it referred to that are unset and have no default.
     */
    record Result(String value, List<String> undefinedVariables) {}

    private EnvironmentSubstitution() {}

    static Result substitute(String text, Map<String, String> environment) {
        List<String> undefinedVariables = new ArrayList<>();
        String value =
                REFERENCE
                        .matcher(text)
                        .replaceAll(
                                reference -> {
                                    String name = reference.group(1);
                                    String defaultValue = reference.group(2);
                                    String fromEnvironment = environment.get(name);
                                    boolean unsetOrEmpty =
                                            fromEnvironment == null || fromEnvironment.isEmpty();
                                    if (defaultValue != null && unsetOrEmpty) {
                                        return Matcher.quoteReplacement(defaultValue);
                                    }
                                    if (fromEnvironment == null) {
                                        undefinedVariables.add(name);
                                        return "";
                                    }
                                    return Matcher.quoteReplacement(fromEnvironment);
                                });
        return new Result(value, List.copyOf(undefinedVariables));
    }
}
