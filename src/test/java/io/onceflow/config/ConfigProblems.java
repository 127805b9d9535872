package io.onceflow.config;

import java.util.List;
import java.util.Map;

/** Builds a configuration that must be invalid and returns its problems. */
final class ConfigProblems {
    private ConfigProblems() {}

    static List<String> of(Map<String, String> settings) {
        return of(settings, Map.of());
    }

    static List<String> of(Map<String, String> settings, Map<String, String> environment) {
        return of(settings, ValueSubstitution.of(environment));
    }

    static List<String> of(Map<String, String> settings, ValueSubstitution substitution) {
        try {
            new OnceflowConfig(new ConfigReader(settings, substitution, List.of()));
        } catch (ConfigException e) {
            return e.problems();
        }
        throw new AssertionError("expected a ConfigException for the keys " + settings.keySet());
    }

    static List<String> ofArguments(String... args) {
        try {
            OnceflowConfig.fromArgs(args, Map.of());
        } catch (ConfigException e) {
            return e.problems();
        }
        throw new AssertionError("expected a ConfigException");
    }
}
