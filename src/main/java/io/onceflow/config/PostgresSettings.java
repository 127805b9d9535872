package io.onceflow.config;

import static io.onceflow.config.ConfigKey.POSTGRES_ACCEPT_COMMIT_LOSS_ON_FAILOVER;
import static io.onceflow.config.ConfigKey.POSTGRES_ALLOW_TRIGGERS_THAT_MAY_STALL_CHECKPOINTS;
import static io.onceflow.config.ConfigKey.POSTGRES_BATCH_SIZE;
import static io.onceflow.config.ConfigKey.POSTGRES_COMMIT_LOG_TABLE;
import static io.onceflow.config.ConfigKey.POSTGRES_EFFECT_FUNCTION;
import static io.onceflow.config.ConfigKey.POSTGRES_EFFECT_KEYS;
import static io.onceflow.config.ConfigKey.POSTGRES_EFFECT_RESULTS_TOPIC;
import static io.onceflow.config.ConfigKey.POSTGRES_HELD_EVENTS_MEMORY_BYTES;
import static io.onceflow.config.ConfigKey.POSTGRES_LOCK_TIMEOUT;
import static io.onceflow.config.ConfigKey.POSTGRES_PASSWORD;
import static io.onceflow.config.ConfigKey.POSTGRES_REJECTS_TABLE;
import static io.onceflow.config.ConfigKey.POSTGRES_RUNS_TABLE;
import static io.onceflow.config.ConfigKey.POSTGRES_SINK_PREFIX;
import static io.onceflow.config.ConfigKey.POSTGRES_STATEMENT_TIMEOUT;
import static io.onceflow.config.ConfigKey.POSTGRES_TABLE;
import static io.onceflow.config.ConfigKey.POSTGRES_URL;
import static io.onceflow.config.ConfigKey.POSTGRES_USER;
import static io.onceflow.config.ConfigKey.POSTGRES_WRITERS_TABLE;

import io.onceflow.sink.postgres.options.PostgresConnectionOptions;
import io.onceflow.sink.postgres.PostgresSinkBuilder;
import io.onceflow.sink.postgres.options.PostgresTableOptions;
import io.onceflow.sink.postgres.options.PostgresWriterOptions;
import java.io.Serializable;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * Settings of the PostgreSQL sink, present iff {@code postgres.url} is set: the sink's three option
 * groups (connection, tables, writer tuning) and its prefix, read from the {@code postgres.*} keys.
 * Immutable; table names are validated identifiers, safe to put into SQL text. The rules and
 * defaults are the option classes'; this class maps keys to them and names the key in each problem.
 */
public final class PostgresSettings implements Serializable {
    private static final long serialVersionUID = 1L;

    private final PostgresConnectionOptions connection;
    private final PostgresTableOptions tables;
    private final PostgresWriterOptions writer;
    private final String sinkPrefix;
    private final boolean acceptCommitLossOnFailover;
    /** Null for none. */
    private final String effectResultsTopic;

    private PostgresSettings(ConfigReader settings, String kafkaTransactionalIdPrefix, boolean sinkPrefixRequired) {
        // read in the order the problems are listed: connection, tables, prefix, then tuning
        connection = new PostgresConnectionOptions(settings.parsed(POSTGRES_URL, ValueParsers::postgresUrl),
                settings.text(POSTGRES_USER), settings.text(POSTGRES_PASSWORD));
        String events = settings.parsed(POSTGRES_TABLE, ValueParsers::sqlTableName);
        String rejects = settings.parsed(POSTGRES_REJECTS_TABLE, ValueParsers::sqlTableName);
        String commitLog = settings.parsed(POSTGRES_COMMIT_LOG_TABLE, ValueParsers::sqlTableName);
        String runs = settings.parsed(POSTGRES_RUNS_TABLE, ValueParsers::sqlTableName);
        String writers = settings.parsed(POSTGRES_WRITERS_TABLE, ValueParsers::sqlTableName);
        sinkPrefix = settings.parsed(POSTGRES_SINK_PREFIX, ValueParsers.accepting(
                PostgresSinkBuilder::isValidSinkPrefix, "is not a valid sink prefix",
                "Use 1 to 40 of the characters a-z, A-Z, 0-9 and '_'."));
        if (sinkPrefixRequired && !settings.isSet(POSTGRES_SINK_PREFIX)) {
            settings.problem(
                    POSTGRES_SINK_PREFIX,
                    "is required when postgres.url is set",
                    requiredSinkPrefixAdvice(kafkaTransactionalIdPrefix));
        }
        PostgresWriterOptions defaults = PostgresWriterOptions.defaults();
        // an invalid value is reported and fails the configuration; its default only fills the slot
        int batchSize = Objects.requireNonNullElse(settings.parsed(POSTGRES_BATCH_SIZE,
                ValueParsers.integerBetween(1, PostgresWriterOptions.MAX_BATCH_SIZE)), defaults.batchSize());
        tables = new PostgresTableOptions(events, rejects, commitLog, runs, writers,
                settings.parsed(POSTGRES_EFFECT_FUNCTION, ValueParsers::sqlFunctionName),
                settings.parsed(POSTGRES_EFFECT_KEYS, ValueParsers::sqlFunctionName),
                // an invalid value is reported (and fails the configuration) and read as null
                Boolean.TRUE.equals(settings.parsed(POSTGRES_ALLOW_TRIGGERS_THAT_MAY_STALL_CHECKPOINTS,
                        ValueParsers.oneOf(List.of(false, true), String::valueOf))));
        writer = new PostgresWriterOptions(
                batchSize,
                settings.parsed(POSTGRES_LOCK_TIMEOUT,
                        ValueParsers.timeout(PostgresWriterOptions.maxLockTimeout(defaults.writerLease()))),
                settings.parsed(POSTGRES_STATEMENT_TIMEOUT, ValueParsers.timeout(PostgresWriterOptions.MAX_TIMEOUT)),
                defaults.writerLease(),
                Objects.requireNonNullElse(settings.parsed(POSTGRES_HELD_EVENTS_MEMORY_BYTES,
                        ValueParsers.integerBetween(0, Integer.MAX_VALUE)), defaults.heldEventsMemoryBytes()));
        // an invalid value is reported (and fails the configuration) and read as null
        acceptCommitLossOnFailover = Boolean.TRUE.equals(settings.parsed(POSTGRES_ACCEPT_COMMIT_LOSS_ON_FAILOVER,
                ValueParsers.oneOf(List.of(false, true), String::valueOf)));
        effectResultsTopic = settings.parsed(POSTGRES_EFFECT_RESULTS_TOPIC, ValueParsers::topicName);
        if (effectResultsTopic != null && tables.effectFunction() == null && !settings.isSet(POSTGRES_EFFECT_FUNCTION)) {
            settings.problem(POSTGRES_EFFECT_RESULTS_TOPIC, "is set but postgres.effect.function is not",
                    "Set postgres.effect.function, whose outcomes it publishes, or remove postgres.effect.results.topic.");
        }
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
        // 0.1's derivation, frozen: it must give what 0.1 gave even if the prefix rule changes
        String derived = kafkaTransactionalIdPrefix.replaceAll("[^a-zA-Z0-9_]", "_");
        derived = derived.substring(0, Math.min(derived.length(), 40));
        return advice + " A job that ran with onceflow 0.1, which derived the prefix from"
                + " kafka.transactional.id.prefix, must keep what it derived: postgres.sink.prefix=" + derived + ".";
    }

    /** Each key whose table another key names too (see {@link PostgresTableOptions#sameTable}). */
    private void checkTablesAreDistinct(ConfigReader settings) {
        List<ConfigKey> keys = List.of(POSTGRES_TABLE, POSTGRES_REJECTS_TABLE, POSTGRES_COMMIT_LOG_TABLE,
                POSTGRES_RUNS_TABLE, POSTGRES_WRITERS_TABLE);
        List<String> names = tables.tableNames();
        for (int i = 1; i < keys.size(); i++) {
            String name = names.get(i);
            if (names.subList(0, i).stream().anyMatch(earlier -> PostgresTableOptions.sameTable(earlier, name))) {
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
        return read(settings, kafkaTransactionalIdPrefix, true);
    }

    /**
     * Reads only what names the tables, for the DDL, which names no transaction: {@code
     * postgres.sink.prefix} is not required (an invalid one is still reported). Reports as {@link
     * #read} does when {@code postgres.url} is not set, and then returns null.
     */
    static PostgresTableOptions readTables(ConfigReader settings) {
        PostgresSettings postgres = read(settings, null, false);
        return postgres == null ? null : postgres.tables();
    }

    private static PostgresSettings read(ConfigReader settings, String kafkaTransactionalIdPrefix,
            boolean sinkPrefixRequired) {
        if (settings.isSet(POSTGRES_URL)) {
            return new PostgresSettings(settings, kafkaTransactionalIdPrefix, sinkPrefixRequired);
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

    /** The Kafka topic of the effects' outcomes ({@code postgres.effect.results.topic}), empty if none. */
    public Optional<String> effectResultsTopic() {
        return Optional.ofNullable(effectResultsTopic);
    }

    /** The URL, user and password ({@code postgres.url}, {@code postgres.user}, {@code postgres.password}). */
    public PostgresConnectionOptions connection() {
        return connection;
    }

    /** The five tables and the effect function ({@code postgres.*table}, {@code postgres.effect.function}). */
    public PostgresTableOptions tables() {
        return tables;
    }

    /** The writer tuning ({@code postgres.batch.size}, {@code postgres.lock.timeout}, ...). */
    public PostgresWriterOptions writer() {
        return writer;
    }

    /**
     * Returns the JDBC URL ({@code postgres.url}).
     *
     * @return a URL starting with {@code jdbc:postgresql:} and containing no password
     */
    public String url() {
        return connection.jdbcUrl();
    }

    /** Returns the database user ({@code postgres.user}), never empty. */
    public String user() {
        return connection.user();
    }

    /** Returns the database password ({@code postgres.password}), empty if none: a secret, never log it. */
    public String password() {
        return connection.password();
    }

    /** Returns the table for deduplicated events ({@code postgres.table}). */
    public String table() {
        return tables.events();
    }

    /** Returns the commit log table ({@code postgres.commit.log.table}). */
    public String commitLogTable() {
        return tables.commitLog();
    }

    /** Returns the rejects table ({@code postgres.rejects.table}). */
    public String rejectsTable() {
        return tables.rejects();
    }

    /** Returns the runs table ({@code postgres.runs.table}). */
    public String runsTable() {
        return tables.runs();
    }

    /** Returns the writers table ({@code postgres.writers.table}). */
    public String writersTable() {
        return tables.writers();
    }

    /**
     * Returns the name of this job's transactions ({@code postgres.sink.prefix}).
     *
     * @return 1 to 40 of {@code [a-zA-Z0-9_]}
     */
    public String sinkPrefix() {
        return sinkPrefix;
    }

    /** Returns the number of rows per batch ({@code postgres.batch.size}). */
    public int batchSize() {
        return writer.batchSize();
    }

    /** Returns the business effect's SQL function ({@code postgres.effect.function}), empty if none. */
    public Optional<String> effectFunction() {
        return Optional.ofNullable(tables.effectFunction());
    }

    /**
     * Tells whether the start accepts a server that streams to replicas its commits do not wait for
     * ({@code postgres.accept.commit.loss.on.failover}); by default it refuses one.
     */
    public boolean acceptCommitLossOnFailover() {
        return acceptCommitLossOnFailover;
    }

    /** Shows all settings with the password redacted. */
    @Override
    public String toString() {
        return "PostgresSettings{" + connection + ", password=" + Secrets.REDACTED + ", " + tables + ", " + writer
                + ", sinkPrefix=" + sinkPrefix + "}";
    }
}
