package io.onceflow.config;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.SortedMap;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.Function;

/**
 * Reads typed values from raw settings while collecting every problem, so that all of them can be
 * reported together; also records the effective value (given or default) of each key read.
 *
 * <p>Values are substituted ({@link ValueSubstitution}) and trimmed; an empty value counts as not set, so that
 * {@code ${VAR:-}} can leave an optional key unset. A getter returns null when the value is
 * missing or invalid; the caller builds nothing from it because {@link #throwIfAnyProblem()} then
 * throws.
 */
final class ConfigReader {
    private final Map<String, String> givenValues = new HashMap<>();
    /** Keys whose value has a reference that could not be resolved; already reported. */
    private final Set<String> unresolvedKeys = new HashSet<>();
    /** Keys whose value came (in part) from a file: secrets, whatever their name. */
    private final Set<String> keysFromFiles = new TreeSet<>();

    private final List<String> problems;
    private final SortedMap<String, String> effectiveValues = new TreeMap<>();

    /**
     * @param settings raw keys and values; null values count as not set
     * @param substitution resolves {@code ${...}} references in the values
     * @param earlierProblems problems found before, e.g. in the command line; reported first
     */
    ConfigReader(
            Map<String, String> settings,
            ValueSubstitution substitution,
            List<String> earlierProblems) {
        problems = new ArrayList<>(earlierProblems);
        // Sorted so that problems come out in the same order on every run.
        new TreeMap<>(settings)
                .forEach(
                        (key, value) -> {
                            if (!ConfigKey.isValidKey(key)) {
                                reportUnknownKey(key);
                            } else if (value != null) {
                                substituteAndKeep(key, value, substitution);
                            }
                        });
    }

    private void reportUnknownKey(String key) {
        Optional<ConfigKey> closest = ConfigKey.closestTo(key);
        if (closest.isPresent()) {
            problem(
                    key,
                    "unknown key '" + key + "'; did you mean '" + closest.get().key() + "'?",
                    "Rename it.");
        } else {
            problem(
                    key,
                    "unknown key '" + key + "'",
                    "Remove it or fix its spelling (--help lists all keys); settings for the Kafka"
                            + " clients go under " + ConfigKey.KAFKA_PROPERTIES_PREFIX + "<name>.");
        }
    }

    private void substituteAndKeep(String key, String value, ValueSubstitution substitution) {
        ValueSubstitution.Result substituted = substitution.substitute(value);
        for (ValueSubstitution.Problem unresolved : substituted.problems()) {
            unresolvedKeys.add(key);
            problem(key, unresolved.whatIsWrong(), unresolved.whatToDo());
        }
        if (substituted.fromFile()) {
            keysFromFiles.add(key);
        }
        String trimmed = substituted.value().trim();
        if (!trimmed.isEmpty()) {
            givenValues.put(key, trimmed);
        }
    }

    /**
     * The keys whose value came from a {@code ${file:...}} reference: a file is where secrets are
     * kept, so such a value is hidden even under a key whose name says nothing secret (a mistyped
     * {@code kafka.properties.*} name, a swapped reference).
     */
    Set<String> keysFromFiles() {
        return Collections.unmodifiableSet(keysFromFiles);
    }

    /** Tells whether the key was given (even if its value is unresolved). */
    boolean isSet(ConfigKey key) {
        return givenValues.containsKey(key.key()) || unresolvedKeys.contains(key.key());
    }

    /** Returns the value or the key's default; null if not set, unresolved or (reported) missing. */
    String text(ConfigKey key) {
        return text(key, key.defaultValue());
    }

    /** As {@link #text(ConfigKey)}, with a default computed by the caller. */
    String text(ConfigKey key, String defaultValue) {
        if (unresolvedKeys.contains(key.key())) {
            return null;
        }
        String value = givenValues.getOrDefault(key.key(), defaultValue);
        if (value == null) {
            if (key.required()) {
                problem(key, "is required but not set", "Set it: " + key.description());
            }
            return null;
        }
        effectiveValues.put(key.key(), value);
        return value;
    }

    /** Parses the value or the key's default; null if not set, or invalid (then reported). */
    <T> T parsed(ConfigKey key, Function<String, T> parser) {
        return parsed(key, key.defaultValue(), parser);
    }

    /** As {@link #parsed(ConfigKey, Function)}, with a default computed by the caller. */
    <T> T parsed(ConfigKey key, String defaultValue, Function<String, T> parser) {
        String text = text(key, defaultValue);
        if (text == null) {
            return null;
        }
        try {
            return parser.apply(text);
        } catch (InvalidValueException e) {
            // The parser's description may quote the value, which must not leak for a secret.
            String whatIsWrong =
                    Secrets.isSecretKey(key.key())
                            ? "the value is invalid"
                            // a value from a file is a secret too: shown as the placeholder, never itself
                            : keysFromFiles.contains(key.key())
                                    ? e.whatIsWrong().replace(text, Secrets.REDACTED)
                                    : e.whatIsWrong();
            problem(key, whatIsWrong, e.whatToDo());
            return null;
        }
    }

    /**
     * Returns the values of all keys starting with {@code prefix}, by the rest of their name, and
     * records them as effective.
     */
    Map<String, String> valuesWithPrefix(String prefix) {
        Map<String, String> values = new HashMap<>();
        givenValues.forEach(
                (key, value) -> {
                    if (key.startsWith(prefix)) {
                        values.put(key.substring(prefix.length()), value);
                        effectiveValues.put(key, value);
                    }
                });
        return values;
    }

    /** Reports a problem with a key. */
    void problem(ConfigKey key, String whatIsWrong, String whatToDo) {
        problem(key.key(), whatIsWrong, whatToDo);
    }

    /** Reports a problem with a key that has no {@link ConfigKey}, e.g. a Kafka client key. */
    void problem(String key, String whatIsWrong, String whatToDo) {
        problems.add(ConfigException.problem(key, whatIsWrong, whatToDo));
    }

    /** Throws a {@link ConfigException} listing every problem reported, if any. */
    void throwIfAnyProblem() {
        if (!problems.isEmpty()) {
            throw new ConfigException(problems);
        }
    }

    /** The effective value of every key read so far, sorted by key. */
    SortedMap<String, String> effectiveValues() {
        return Collections.unmodifiableSortedMap(new TreeMap<>(effectiveValues));
    }
}
