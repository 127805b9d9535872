package io.onceflow.config;

import static io.onceflow.config.ConfigKey.POSTGRES_BATCH_SIZE;
import static io.onceflow.config.ConfigKey.POSTGRES_COMMIT_LOG_TABLE;
import static io.onceflow.config.ConfigKey.POSTGRES_EFFECT_FUNCTION;
import static io.onceflow.config.ConfigKey.POSTGRES_PASSWORD;
import static io.onceflow.config.ConfigKey.POSTGRES_REJECTS_TABLE;
import static io.onceflow.config.ConfigKey.POSTGRES_RUNS_TABLE;
import static io.onceflow.config.ConfigKey.POSTGRES_SINK_PREFIX;
import static io.onceflow.config.ConfigKey.POSTGRES_TABLE;
import static io.onceflow.config.ConfigKey.POSTGRES_URL;
import static io.onceflow.config.ConfigKey.POSTGRES_USER;
import static io.onceflow.config.ConfigKey.POSTGRES_WRITERS_TABLE;

import java.io.Serializable;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * Settings of the PostgreSQL sink, present iff {@code postgres.url} is set. Immutable; table names
 * are validated identifiers, safe to put into SQL text.
 */
public final class PostgresSettings implements Serializable {
    private static final long serialVersionUID = 1L;

    private static final int SINK_PREFIX_MAX_LENGTH = 40;
    private static final Pattern SINK_PREFIX =
            Pattern.compile("[a-zA-Z0-9_]{1," + SINK_PREFIX_MAX_LENGTH + "}");
    private static final Pattern NOT_ALLOWED_IN_SINK_PREFIX = Pattern.compile("[^a-zA-Z0-9_]");

    private final String url;
    private final String user;
    private final String password;
    private final String table;
    private final String rejectsTable;
    private final String commitLogTable;
    private final String runsTable;
    private final String writersTable;
    private final String sinkPrefix;
    private final Integer batchSize;
    private final String effectFunction;

    private PostgresSettings(ConfigReader settings, String kafkaTransactionalIdPrefix) {
        url = settings.parsed(POSTGRES_URL, ValueParsers::postgresUrl);
        user = settings.text(POSTGRES_USER);
        password = Objects.requireNonNullElse(settings.text(POSTGRES_PASSWORD), "");
        table = settings.parsed(POSTGRES_TABLE, ValueParsers::sqlTableName);
        rejectsTable = settings.parsed(POSTGRES_REJECTS_TABLE, ValueParsers::sqlTableName);
        commitLogTable = settings.parsed(POSTGRES_COMMIT_LOG_TABLE, ValueParsers::sqlTableName);
        runsTable = settings.parsed(POSTGRES_RUNS_TABLE, ValueParsers::sqlTableName);
        writersTable = settings.parsed(POSTGRES_WRITERS_TABLE, ValueParsers::sqlTableName);
        sinkPrefix =
                settings.parsed(
                        POSTGRES_SINK_PREFIX,
                        ValueParsers.matching(
                                SINK_PREFIX,
                                "is not a valid sink prefix",
                                "Use 1 to 40 of the characters a-z, A-Z, 0-9 and '_'."));
        if (!settings.isSet(POSTGRES_SINK_PREFIX)) {
            settings.problem(
                    POSTGRES_SINK_PREFIX,
                    "is required when postgres.url is set",
                    requiredSinkPrefixAdvice(kafkaTransactionalIdPrefix));
        }
        batchSize = settings.parsed(POSTGRES_BATCH_SIZE, ValueParsers.integerBetween(1, 100_000));
        effectFunction = settings.parsed(POSTGRES_EFFECT_FUNCTION, ValueParsers::sqlFunctionName);
        checkTablesAreDistinct(settings);
    }

    /**
     * onceflow 0.1 derived the prefix from the Kafka one by replacing characters and cutting at 40,
     * so that {@code orders-eu}, {@code orders.eu} and {@code orders_eu} collided, and one job's
     * fresh start rolled back the other's transactions. The prefix is now required; a job that ran
     * with the derived one must keep it, or its prepared transactions would be orphaned.
     */
    private static String requiredSinkPrefixAdvice(String kafkaTransactionalIdPrefix) {
        String advice = "Choose 1 to 40 of a-z, A-Z, 0-9 and '_', unique among the jobs using this database and the"
                + " same across restarts and upgrades of this job.";
        if (kafkaTransactionalIdPrefix == null) {
            return advice;
        }
        String derived = NOT_ALLOWED_IN_SINK_PREFIX.matcher(kafkaTransactionalIdPrefix).replaceAll("_");
        derived = derived.substring(0, Math.min(derived.length(), SINK_PREFIX_MAX_LENGTH));
        return advice + " A job that ran with onceflow 0.1, which derived the prefix from"
                + " kafka.transactional.id.prefix, must keep what it derived: postgres.sink.prefix=" + derived + ".";
    }

    /** Unquoted identifiers are case-insensitive in PostgreSQL. */
    private void checkTablesAreDistinct(ConfigReader settings) {
        List<ConfigKey> keys = List.of(POSTGRES_TABLE, POSTGRES_REJECTS_TABLE, POSTGRES_COMMIT_LOG_TABLE,
                POSTGRES_RUNS_TABLE, POSTGRES_WRITERS_TABLE);
        List<String> names = Arrays.asList(table, rejectsTable, commitLogTable, runsTable, writersTable);
        for (int i = 1; i < keys.size(); i++) {
            String name = names.get(i);
            if (name != null && names.subList(0, i).stream()
                    .anyMatch(earlier -> earlier != null && earlier.toLowerCase(Locale.ROOT).equals(name.toLowerCase(Locale.ROOT)))) {
                settings.problem(keys.get(i), "names a table that another postgres.*table key names too",
                        "Give each of the sink's tables its own name.");
            }
        }
    }

    /**
     * Reads the settings if {@code postgres.url} is set. Otherwise reports every other {@code
     * postgres.*} key given, as it would silently have no effect, and returns null.
     */
    static PostgresSettings read(ConfigReader settings, String kafkaTransactionalIdPrefix) {
        if (settings.isSet(POSTGRES_URL)) {
            return new PostgresSettings(settings, kafkaTransactionalIdPrefix);
        }
        Arrays.stream(ConfigKey.values())
                .filter(key -> key.key().startsWith("postgres.") && settings.isSet(key))
                .forEach(
                        key ->
                                settings.problem(
                                        key,
                                        "is set but postgres.url is not",
                                        "Set postgres.url to enable the PostgreSQL sink, or remove "
                                                + key.key() + "."));
        return null;
    }

    /**
     * Returns the JDBC URL ({@code postgres.url}).
     *
     * @return a URL starting with {@code jdbc:postgresql:} and containing no password
     */
    public String url() {
        return url;
    }

    /**
     * Returns the database user ({@code postgres.user}).
     *
     * @return the user name, never empty
     */
    public String user() {
        return user;
    }

    /**
     * Returns the database password ({@code postgres.password}). A secret: never log it.
     *
     * @return the password; empty if none was set
     */
    public String password() {
        return password;
    }

    /**
     * Returns the table for deduplicated events ({@code postgres.table}).
     *
     * @return {@code table} or {@code schema.table}, each part matching {@code
     *     [a-zA-Z_][a-zA-Z0-9_]{0,62}}
     */
    public String table() {
        return table;
    }

    /**
     * Returns the table in which the sink records committed transactions ({@code
     * postgres.commit.log.table}).
     *
     * @return {@code table} or {@code schema.table}, each part matching {@code
     *     [a-zA-Z_][a-zA-Z0-9_]{0,62}}; differs from {@link #table()}
     */
    public String commitLogTable() {
        return commitLogTable;
    }

    /**
     * Returns the rejects table ({@code postgres.rejects.table}).
     *
     * @return {@code table} or {@code schema.table}
     */
    public String rejectsTable() {
        return rejectsTable;
    }

    /**
     * Returns the runs table ({@code postgres.runs.table}).
     *
     * @return {@code table} or {@code schema.table}
     */
    public String runsTable() {
        return runsTable;
    }

    /**
     * Returns the writers table ({@code postgres.writers.table}).
     *
     * @return {@code table} or {@code schema.table}
     */
    public String writersTable() {
        return writersTable;
    }

    /**
     * Returns the name of this job's transactions ({@code postgres.sink.prefix}).
     *
     * @return 1 to 40 of {@code [a-zA-Z0-9_]}
     */
    public String sinkPrefix() {
        return sinkPrefix;
    }

    /**
     * Returns the number of rows per JDBC batch ({@code postgres.batch.size}).
     *
     * @return 1 to 100000
     */
    public int batchSize() {
        return batchSize;
    }

    /**
     * Returns the business effect's SQL function ({@code postgres.effect.function}).
     *
     * @return {@code function} or {@code schema.function}, each part matching {@code
     *     [a-zA-Z_][a-zA-Z0-9_]{0,62}}; empty if none is set
     */
    public Optional<String> effectFunction() {
        return Optional.ofNullable(effectFunction);
    }

    /** Shows all settings with the password redacted. */
    @Override
    public String toString() {
        return "PostgresSettings{url=" + url
                + ", user=" + user
                + ", password=" + Secrets.REDACTED
                + ", table=" + table
                + ", rejectsTable=" + rejectsTable
                + ", commitLogTable=" + commitLogTable
                + ", runsTable=" + runsTable
                + ", writersTable=" + writersTable
                + ", sinkPrefix=" + sinkPrefix
                + ", batchSize=" + batchSize
                + ", effectFunction=" + effectFunction
                + "}";
    }
}
