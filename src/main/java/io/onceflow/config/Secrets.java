package io.onceflow.config;

import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.SortedMap;
import java.util.TreeMap;

/** Decides which configuration keys hold secrets and hides their values. */
public final class Secrets {
    /** Shown in place of a secret value. */
    public static final String REDACTED = "******";

    private static final List<String> SECRET_KEY_PARTS =
            List.of("password", "passphrase", "secret", "token", "sasl.jaas.config", "ssl.key", "credentials");

    private Secrets() {}

    /**
     * Tells whether a key holds a secret by its name: its lower-cased name contains {@code password},
     * {@code passphrase}, {@code secret}, {@code token}, {@code sasl.jaas.config}, {@code ssl.key} or
     * {@code credentials} (every setting the Kafka clients type as a password among them). A value read
     * from a file is a secret too, whatever its key ({@link OnceflowConfig#isSecret}).
     *
     * @param key a configuration key, e.g. {@code postgres.password}
     * @return true if values of this key must never be shown
     */
    public static boolean isSecretKey(String key) {
        String lowerCaseKey = key.toLowerCase(Locale.ROOT);
        return SECRET_KEY_PARTS.stream().anyMatch(lowerCaseKey::contains);
    }

    /**
     * Returns a copy of the settings in which every secret value is {@link #REDACTED}.
     *
     * @param settings keys and values; not modified
     * @return an unmodifiable copy sorted by key
     */
    public static SortedMap<String, String> redact(Map<String, String> settings) {
        return redact(settings, Set.of());
    }

    /**
     * As {@link #redact(Map)}, hiding the values of {@code alsoSecret} too.
     *
     * @param settings keys and values; not modified
     * @param alsoSecret keys whose values are secrets whatever their names
     * @return an unmodifiable copy sorted by key
     */
    public static SortedMap<String, String> redact(Map<String, String> settings, Set<String> alsoSecret) {
        SortedMap<String, String> redacted = new TreeMap<>();
        settings.forEach((key, value) ->
                redacted.put(key, isSecretKey(key) || alsoSecret.contains(key) ? REDACTED : value));
        return Collections.unmodifiableSortedMap(redacted);
    }
}
