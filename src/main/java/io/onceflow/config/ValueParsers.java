package io.onceflow.config;

import static java.time.temporal.ChronoUnit.DAYS;
import static java.time.temporal.ChronoUnit.HOURS;
import static java.time.temporal.ChronoUnit.MILLIS;
import static java.time.temporal.ChronoUnit.MINUTES;
import static java.time.temporal.ChronoUnit.SECONDS;

import io.onceflow.ingest.MessageIdSource;
import io.onceflow.sink.postgres.options.PostgresConnectionOptions;
import io.onceflow.sink.postgres.options.PostgresTableOptions;
import io.onceflow.sink.postgres.options.PostgresWriterOptions;
import java.net.URI;
import java.net.URISyntaxException;
import java.time.Duration;
import java.time.format.DateTimeParseException;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Function;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Parsers and validators for configuration values. Each takes a trimmed, non-empty text and
 * returns the parsed value or throws {@link InvalidValueException}.
 */
final class ValueParsers {
    private static final Pattern DURATION_WITH_UNIT = Pattern.compile("(\\d+)(ms|s|min|m|h|d)");
    private static final Map<String, ChronoUnit> DURATION_UNITS =
            Map.of("ms", MILLIS, "s", SECONDS, "min", MINUTES, "m", MINUTES, "h", HOURS, "d", DAYS);
    /** Largest first, so that a duration is shown in the largest unit that divides it. */
    private static final List<Map.Entry<String, ChronoUnit>> DISPLAY_UNITS =
            List.of(
                    Map.entry("d", DAYS),
                    Map.entry("h", HOURS),
                    Map.entry("min", MINUTES),
                    Map.entry("s", SECONDS),
                    Map.entry("ms", MILLIS));

    /** Kafka's own rule for topic names (org.apache.kafka.common.internals.Topic). */
    private static final Pattern TOPIC_NAME = Pattern.compile("[a-zA-Z0-9._-]{1,249}");

    private static final Pattern HOST_AND_PORT =
            Pattern.compile("(\\[[0-9a-fA-F:.]+]|[a-zA-Z0-9._-]+):(\\d{1,5})");
    /**
     * An unquoted PostgreSQL identifier (at most 63 bytes). Only these characters are allowed, so
     * table names can be put into SQL text without any way to inject SQL.
     */
    /** An '@' in the authority of a URL: {@code //user:password@host}. */
    private static final Pattern USER_INFO_IN_URL = Pattern.compile("//[^/?#]*@");

    private ValueParsers() {}

    /**
     * Parses {@code 500ms}, {@code 30s}, {@code 10min} or {@code 10m}, {@code 2h}, {@code 7d}, or
     * ISO-8601 such as {@code PT10M}.
     */
    static Duration duration(String text) {
        try {
            Matcher withUnit = DURATION_WITH_UNIT.matcher(text);
            if (withUnit.matches()) {
                return Duration.of(
                        Long.parseLong(withUnit.group(1)), DURATION_UNITS.get(withUnit.group(2)));
            }
            if (text.toUpperCase(Locale.ROOT).matches("[-+]?P.*")) {
                return Duration.parse(text);
            }
        } catch (NumberFormatException | ArithmeticException | DateTimeParseException e) {
            // Falls through to the error below: too large, or not ISO-8601 after all.
        }
        throw new InvalidValueException(
                "'" + text + "' is not a duration",
                "Use a whole number with a unit ms, s, min (or m), h or d, e.g. 30s or 7d, or"
                        + " ISO-8601 such as PT10M.");
    }

    /** Returns a parser of durations that are at least {@code minimum}. */
    static Function<String, Duration> durationAtLeast(Duration minimum) {
        return text -> {
            Duration duration = duration(text);
            if (duration.compareTo(minimum) < 0) {
                throw new InvalidValueException(
                        "'" + text + "' is less than " + format(minimum),
                        "Use a duration of at least " + format(minimum) + ".");
            }
            return duration;
        };
    }

    /** Shows a duration the way it is configured, e.g. {@code 15min}; ISO-8601 if sub-millisecond. */
    static String format(Duration duration) {
        if (duration.isZero()) {
            return "0ms";
        }
        for (Map.Entry<String, ChronoUnit> unit : DISPLAY_UNITS) {
            Duration unitLength = unit.getValue().getDuration();
            long count = duration.dividedBy(unitLength);
            if (unitLength.multipliedBy(count).equals(duration)) {
                return count + unit.getKey();
            }
        }
        return duration.toString();
    }

    /**
     * Returns a parser of a PostgreSQL timeout: {@link PostgresWriterOptions#MIN_TIMEOUT} to
     * {@code maximum}.
     */
    static Function<String, Duration> timeout(Duration maximum) {
        Function<String, Duration> atLeast = durationAtLeast(PostgresWriterOptions.MIN_TIMEOUT);
        return text -> {
            Duration timeout = atLeast.apply(text);
            if (timeout.compareTo(maximum) > 0) {
                throw new InvalidValueException("'" + text + "' is more than " + format(maximum),
                        "Use a duration of at most " + format(maximum) + ".");
            }
            return timeout;
        };
    }

    /** Returns a parser of whole numbers from {@code minimum} to {@code maximum}. */
    static Function<String, Integer> integerBetween(int minimum, int maximum) {
        return text -> {
            try {
                int number = Integer.parseInt(text);
                if (number >= minimum && number <= maximum) {
                    return number;
                }
            } catch (NumberFormatException e) {
                // Not a whole number (or beyond int): reported below like any out-of-range value.
            }
            throw new InvalidValueException(
                    "'" + text + "' is not a whole number from " + minimum + " to " + maximum,
                    "Use a whole number from " + minimum + " to " + maximum + ".");
        };
    }

    /** Validates one Kafka topic name. */
    static String topicName(String text) {
        if (!TOPIC_NAME.matcher(text).matches() || text.equals(".") || text.equals("..")) {
            throw new InvalidValueException(
                    "'" + text + "' is not a valid Kafka topic name",
                    "Use 1 to 249 of the characters a-z, A-Z, 0-9, '.', '_' and '-' (but not '.' or"
                            + " '..').");
        }
        return text;
    }

    /** Parses a comma-separated list of distinct topic names. */
    static List<String> topicList(String text) {
        List<String> topics = new ArrayList<>();
        for (String topic : commaSeparated(text)) {
            if (topics.contains(topic)) {
                throw new InvalidValueException(
                        "lists the topic '" + topic + "' twice", "List each topic once.");
            }
            topics.add(topicName(topic));
        }
        return List.copyOf(topics);
    }

    /** Validates a comma-separated list of host:port pairs (IPv6 hosts in brackets). */
    static String hostAndPortList(String text) {
        for (String server : commaSeparated(text)) {
            Matcher hostAndPort = HOST_AND_PORT.matcher(server);
            if (!hostAndPort.matches() || !isPortNumber(hostAndPort.group(2))) {
                throw new InvalidValueException(
                        "'" + server + "' is not of the form host:port",
                        "List the brokers as host:port[,host:port...] with ports from 1 to 65535,"
                                + " e.g. kafka-1:9092,kafka-2:9092.");
            }
        }
        return text;
    }

    private static boolean isPortNumber(String digits) {
        int port = Integer.parseInt(digits);
        return port >= 1 && port <= 65535;
    }

    /**
     * Validates {@code header:<name>}, {@code json:<JSON pointer>} or {@code key} with the parser the
     * job uses, so that a spec accepted here never fails later while the job graph is built.
     */
    static String messageIdSource(String text) {
        try {
            MessageIdSource.parse(text);
        } catch (IllegalArgumentException e) {
            // the parser's message already lists the allowed forms
            throw new InvalidValueException(e.getMessage(), "Set message.id.source to one of those forms.");
        }
        return text;
    }

    /** Validates a table name: {@code table} or {@code schema.table}, unquoted identifiers only. */
    static String sqlTableName(String text) {
        return sqlName(text, "table");
    }

    /** Validates a function name: {@code function} or {@code schema.function}, as {@link #sqlTableName}. */
    static String sqlFunctionName(String text) {
        return sqlName(text, "function");
    }

    private static String sqlName(String text, String kind) {
        boolean valid = PostgresTableOptions.isValidName(text);
        if (!valid) {
            throw new InvalidValueException(
                    "'" + text + "' is not a valid " + kind + " name",
                    "Use only letters a-z and A-Z, digits and '_', not starting with a digit, at"
                            + " most 63 characters, optionally qualified as schema." + kind + ".");
        }
        return text;
    }

    /**
     * Validates a checkpoint storage URI. Flink needs a scheme and refuses the root directory, but
     * would only say so when the job starts.
     */
    static String checkpointUri(String text) {
        URI uri;
        try {
            uri = new URI(text);
        } catch (URISyntaxException e) {
            throw notAUriWithScheme(text);
        }
        if (uri.getScheme() == null) {
            throw notAUriWithScheme(text);
        }
        if (uri.getPath() == null || uri.getPath().isEmpty() || uri.getPath().equals("/")) {
            throw new InvalidValueException(
                    "'" + text + "' has no directory path",
                    "Flink cannot use a root directory for checkpoints; add a directory, e.g."
                            + " s3://bucket/onceflow.");
        }
        return text;
    }

    private static InvalidValueException notAUriWithScheme(String text) {
        return new InvalidValueException(
                "'" + text + "' is not a URI with a scheme",
                "Give a URI such as file:///var/onceflow/checkpoints or s3://bucket/onceflow.");
    }

    /**
     * Validates a PostgreSQL JDBC URL. A password in the URL is refused because the URL is not a
     * secret key and would be shown in logs and the Flink web UI; so is user information
     * ({@code user:password@host}), which the driver would even take for a host name and echo in
     * its connection errors. Neither problem quotes the URL.
     */
    static String postgresUrl(String text) {
        if (text.toLowerCase(Locale.ROOT).contains("password=")) {
            throw new InvalidValueException(
                    "contains a password",
                    "Remove it from the URL and set postgres.password (e.g. to ${PGPASSWORD}),"
                            + " which is never shown.");
        }
        if (USER_INFO_IN_URL.matcher(text).find()) {
            throw new InvalidValueException(
                    "contains user information (user:password@host)",
                    "Remove it from the URL and set postgres.user and postgres.password (e.g. to"
                            + " ${PGPASSWORD}), which is never shown.");
        }
        if (!text.startsWith(PostgresConnectionOptions.URL_PREFIX)) {
            throw new InvalidValueException(
                    "is not a PostgreSQL JDBC URL (it does not start with jdbc:postgresql:; not quoted: a"
                            + " mistyped URL may hold credentials)",
                    "Use jdbc:postgresql://host:port/database.");
        }
        return text;
    }

    /** Returns a validator accepting text that matches {@code pattern} entirely. */
    static Function<String, String> matching(Pattern pattern, String whatIsWrong, String whatToDo) {
        return accepting(pattern.asMatchPredicate(), whatIsWrong, whatToDo);
    }

    /** Returns a validator accepting text that {@code valid} accepts. */
    static Function<String, String> accepting(Predicate<String> valid, String whatIsWrong, String whatToDo) {
        return text -> {
            if (!valid.test(text)) {
                throw new InvalidValueException("'" + text + "' " + whatIsWrong, whatToDo);
            }
            return text;
        };
    }

    /** Returns a parser that accepts exactly the names of {@code choices}. */
    static <T> Function<String, T> oneOf(List<T> choices, Function<T, String> nameOf) {
        Map<String, T> byName = new LinkedHashMap<>();
        choices.forEach(choice -> byName.put(nameOf.apply(choice), choice));
        return text -> {
            T choice = byName.get(text);
            if (choice == null) {
                String names = String.join(", ", byName.keySet());
                throw new InvalidValueException(
                        "'" + text + "' is not one of " + names, "Use one of " + names + ".");
            }
            return choice;
        };
    }

    /** Splits at commas and trims; an empty element (e.g. from a doubled comma) is an error. */
    private static List<String> commaSeparated(String text) {
        List<String> elements = new ArrayList<>();
        for (String element : text.split(",", -1)) {
            if (element.isBlank()) {
                throw new InvalidValueException(
                        "has an empty element in '" + text + "'",
                        "Separate the elements with single commas and no trailing comma.");
            }
            elements.add(element.trim());
        }
        return elements;
    }
}
