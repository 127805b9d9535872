package io.onceflow.config;

import static io.onceflow.config.ConfigKey.POSTGRES_BATCH_SIZE;
import static io.onceflow.config.ConfigKey.POSTGRES_COMMIT_LOG_TABLE;
import static io.onceflow.config.ConfigKey.POSTGRES_PASSWORD;
import static io.onceflow.config.ConfigKey.POSTGRES_SINK_PREFIX;
import static io.onceflow.config.ConfigKey.POSTGRES_TABLE;
import static io.onceflow.config.ConfigKey.POSTGRES_URL;
import static io.onceflow.config.ConfigKey.POSTGRES_USER;

import java.io.Serializable;
import java.util.Arrays;
import java.util.Objects;
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
    private final String commitLogTable;
    private final String sinkPrefix;
    private final Integer batchSize;

    private PostgresSettings(ConfigReader settings, String kafkaTransactionalIdPrefix) {
        url = settings.parsed(POSTGRES_URL, ValueParsers::postgresUrl);
        user = settings.text(POSTGRES_USER);
        password = Objects.requireNonNullElse(settings.text(POSTGRES_PASSWORD), "");
        table = settings.parsed(POSTGRES_TABLE, ValueParsers::sqlTableName);
        commitLogTable = settings.parsed(POSTGRES_COMMIT_LOG_TABLE, ValueParsers::sqlTableName);
        sinkPrefix =
                settings.parsed(
                        POSTGRES_SINK_PREFIX,
                        defaultSinkPrefix(kafkaTransactionalIdPrefix),
                        ValueParsers.matching(
                                SINK_PREFIX,
                                "is not a valid sink prefix",
                                "Use 1 to 40 of the characters a-z, A-Z, 0-9 and '_'."));
        batchSize = settings.parsed(POSTGRES_BATCH_SIZE, ValueParsers.integerBetween(1, 100_000));
        // Unquoted identifiers are case-insensitive in PostgreSQL.
        if (table != null && table.equalsIgnoreCase(commitLogTable)) {
            settings.problem(
                    POSTGRES_COMMIT_LOG_TABLE,
                    "is the same table as postgres.table",
                    "Give the commit log its own table.");
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

    /** The Kafka prefix with every character not allowed replaced by '_'; null if it is null. */
    private static String defaultSinkPrefix(String kafkaTransactionalIdPrefix) {
        if (kafkaTransactionalIdPrefix == null) {
            return null;
        }
        String replaced =
                NOT_ALLOWED_IN_SINK_PREFIX.matcher(kafkaTransactionalIdPrefix).replaceAll("_");
        return replaced.substring(0, Math.min(replaced.length(), SINK_PREFIX_MAX_LENGTH));
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
     * Returns the name of this job's transactions in the commit log ({@code postgres.sink.prefix}).
     *
     * @return 1 to 40 of {@code [a-zA-Z0-9_]}; by default derived from the Kafka transactional id
     *     prefix
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

    /** Shows all settings with the password redacted. */
    @Override
    public String toString() {
        return "PostgresSettings{url=" + url
                + ", user=" + user
                + ", password=" + Secrets.REDACTED
                + ", table=" + table
                + ", commitLogTable=" + commitLogTable
                + ", sinkPrefix=" + sinkPrefix
                + ", batchSize=" + batchSize
                + "}";
    }
}
