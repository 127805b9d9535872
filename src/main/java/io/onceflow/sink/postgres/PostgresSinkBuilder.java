package io.onceflow.sink.postgres;

import io.onceflow.api.Event;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.commit.TransactionId;
import io.onceflow.sink.postgres.internal.schema.PostgresSchema;
import io.onceflow.sink.postgres.internal.schema.SqlIdentifiers;
import io.onceflow.sink.postgres.internal.writer.PostgresAtLeastOnceSink;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.apache.flink.api.connector.sink2.Sink;

/**
 * Builds a {@link PostgresSink} (exactly-once) or an at-least-once sink with the same upsert.
 *
 * <pre>{@code
 * PostgresSink sink = PostgresSink.builder()
 *         .setJdbcUrl("jdbc:postgresql://db:5432/onceflow")
 *         .setUser("onceflow")
 *         .setPassword(secret)
 *         .setSinkPrefix("orders_pg")
 *         .build();
 * }</pre>
 *
 * <p>{@link #build()} and {@link #buildAtLeastOnce()} check every setting and report all problems
 * at once, each with what to do. The password never appears in messages or {@code toString()}.
 */
public final class PostgresSinkBuilder {
    public static final String DEFAULT_TABLE = "onceflow_events";
    public static final String DEFAULT_REJECTS_TABLE = "onceflow_rejects";
    public static final String DEFAULT_COMMIT_LOG_TABLE = "onceflow_commit_log";
    public static final String DEFAULT_RUNS_TABLE = "onceflow_runs";
    public static final String DEFAULT_WRITERS_TABLE = "onceflow_writers";
    public static final int DEFAULT_BATCH_SIZE = 1000;
    public static final int MAX_BATCH_SIZE = 100_000;
    public static final Duration DEFAULT_LOCK_TIMEOUT = Duration.ofSeconds(30);
    public static final Duration DEFAULT_STATEMENT_TIMEOUT = Duration.ofSeconds(120);
    public static final Duration DEFAULT_WRITER_LEASE = Duration.ofSeconds(30);

    private String jdbcUrl;
    private String user;
    private String password = "";
    private String table = DEFAULT_TABLE;
    private String rejectsTable = DEFAULT_REJECTS_TABLE;
    private String commitLogTable = DEFAULT_COMMIT_LOG_TABLE;
    private String runsTable = DEFAULT_RUNS_TABLE;
    private String writersTable = DEFAULT_WRITERS_TABLE;
    private String effectFunction;
    private String sinkPrefix;
    private int batchSize = DEFAULT_BATCH_SIZE;
    private Duration lockTimeout = DEFAULT_LOCK_TIMEOUT;
    private Duration statementTimeout = DEFAULT_STATEMENT_TIMEOUT;
    private int tolerableCheckpointFailures;
    private Duration writerLease = DEFAULT_WRITER_LEASE;

    PostgresSinkBuilder() {}

    /** Required: {@code jdbc:postgresql://host:port/database}, without a password in it. */
    public PostgresSinkBuilder setJdbcUrl(String jdbcUrl) {
        this.jdbcUrl = jdbcUrl;
        return this;
    }

    /** Required: the database user. */
    public PostgresSinkBuilder setUser(String user) {
        this.user = user;
        return this;
    }

    /** The password; none (empty) by default. */
    public PostgresSinkBuilder setPassword(String password) {
        this.password = password == null ? "" : password;
        return this;
    }

    /** The event table, {@code table} or {@code schema.table}; default {@value #DEFAULT_TABLE}. */
    public PostgresSinkBuilder setTable(String table) {
        this.table = table;
        return this;
    }

    /** The table of rows the database refused; default {@value #DEFAULT_REJECTS_TABLE}. */
    public PostgresSinkBuilder setRejectsTable(String rejectsTable) {
        this.rejectsTable = rejectsTable;
        return this;
    }

    /** The commit log table; default {@value #DEFAULT_COMMIT_LOG_TABLE}. May be shared by sinks. */
    public PostgresSinkBuilder setCommitLogTable(String commitLogTable) {
        this.commitLogTable = commitLogTable;
        return this;
    }

    /** The table of runs (job submissions); default {@value #DEFAULT_RUNS_TABLE}. May be shared by sinks. */
    public PostgresSinkBuilder setRunsTable(String runsTable) {
        this.runsTable = runsTable;
        return this;
    }

    /** The table of writer claims; default {@value #DEFAULT_WRITERS_TABLE}. May be shared by sinks. */
    public PostgresSinkBuilder setWritersTable(String writersTable) {
        this.writersTable = writersTable;
        return this;
    }

    /**
     * A business effect: the SQL function {@code name(message_id text, payload jsonb) RETURNS jsonb}
     * ({@code name} or {@code schema.name}) to call once per message id, with its result stored in
     * the id's row's {@code result} column in the same transaction (see
     * {@link EffectFunction} for the contract); none (null) by default. Without one, each batch is a
     * single upsert.
     */
    public PostgresSinkBuilder setEffectFunction(String effectFunction) {
        this.effectFunction = effectFunction;
        return this;
    }

    /**
     * Required for {@link #build()}: 1 to 40 of {@code a-z A-Z 0-9 _}, stable across restarts and
     * upgrades of the job, and unique among the jobs writing to the same database.
     */
    public PostgresSinkBuilder setSinkPrefix(String sinkPrefix) {
        this.sinkPrefix = sinkPrefix;
        return this;
    }

    /** Distinct ids per INSERT statement, 1 to {@value #MAX_BATCH_SIZE}; default {@value #DEFAULT_BATCH_SIZE}. */
    public PostgresSinkBuilder setBatchSize(int batchSize) {
        this.batchSize = batchSize;
        return this;
    }

    /** The longest wait for a row lock (PostgreSQL {@code lock_timeout}); default 30 s. */
    public PostgresSinkBuilder setLockTimeout(Duration lockTimeout) {
        this.lockTimeout = lockTimeout;
        return this;
    }

    /** The longest statement (PostgreSQL {@code statement_timeout}); default 120 s. */
    public PostgresSinkBuilder setStatementTimeout(Duration statementTimeout) {
        this.statementTimeout = statementTimeout;
        return this;
    }

    /**
     * How many checkpoints may fail in a row without failing the job (Flink's
     * {@code execution.checkpointing.tolerable-failed-checkpoints}); default 0. Each one leaves a
     * prepared transaction per subtask waiting for the next completed checkpoint, so
     * {@code max_prepared_transactions} is checked against it.
     */
    public PostgresSinkBuilder setTolerableCheckpointFailures(int tolerableCheckpointFailures) {
        this.tolerableCheckpointFailures = tolerableCheckpointFailures;
        return this;
    }

    /**
     * How long a writer's session may stay silent before another attempt may presume it paused or
     * dead and end it, where Flink's attempt order cannot decide (see the operations guide on
     * zombie attempts); default 30 s. Writers renew it every third of it.
     */
    public PostgresSinkBuilder setWriterLease(Duration writerLease) {
        this.writerLease = writerLease;
        return this;
    }

    /**
     * The exactly-once sink.
     *
     * @throws IllegalArgumentException listing every invalid setting
     */
    public PostgresSink build() {
        List<String> problems = commonProblems();
        if (sinkPrefix == null || !TransactionId.SINK_PREFIX.matcher(sinkPrefix).matches()) {
            problems.add("sink prefix '" + sinkPrefix + "' is not valid: use 1 to 40 of the characters a-z, A-Z, 0-9"
                    + " and '_', stable across restarts of the job and unique among jobs using the database");
        }
        return new PostgresSink(validConfig(problems, sinkPrefix));
    }

    /**
     * An at-least-once sink with the same upsert: rows become visible batch by batch (autocommit),
     * and every row is written before a checkpoint completes. A restart replays rows written after
     * the last checkpoint, which raises their {@code deliveries}. No sink prefix, commit log or
     * prepared transactions are needed.
     *
     * @throws IllegalArgumentException listing every invalid setting
     */
    public Sink<Event> buildAtLeastOnce() {
        return new PostgresAtLeastOnceSink(validConfig(commonProblems(), null));
    }

    private List<String> commonProblems() {
        List<String> problems = new ArrayList<>();
        if (jdbcUrl == null || !jdbcUrl.startsWith("jdbc:postgresql:")) {
            problems.add("JDBC URL '" + jdbcUrl + "' is not a PostgreSQL URL: use jdbc:postgresql://host:port/database");
        } else if (jdbcUrl.toLowerCase(Locale.ROOT).contains("password=")) {
            // Not echoed: it holds the secret.
            problems.add("the JDBC URL contains a password: remove it from the URL and use setPassword, since URLs"
                    + " appear in logs and in the Flink web UI");
        }
        if (user == null || user.isBlank()) {
            problems.add("user is not set: set the database user with setUser");
        }
        checkTableName(problems, "table", table);
        checkTableName(problems, "rejects table", rejectsTable);
        checkTableName(problems, "commit log table", commitLogTable);
        checkTableName(problems, "runs table", runsTable);
        checkTableName(problems, "writers table", writersTable);
        String clash = PostgresSchema.sameTableProblem(List.of(table, rejectsTable, commitLogTable, runsTable,
                writersTable));
        if (clash != null) {
            problems.add(clash);
        }
        if (effectFunction != null && !SqlIdentifiers.isQualifiedName(effectFunction)) {
            problems.add(SqlIdentifiers.functionNameProblem("effect function", effectFunction)
                    + ", or null for none");
        }
        if (batchSize < 1 || batchSize > MAX_BATCH_SIZE) {
            problems.add("batch size " + batchSize + " is out of range: use 1 to " + MAX_BATCH_SIZE);
        }
        checkTimeout(problems, "lock timeout", lockTimeout);
        checkTimeout(problems, "statement timeout", statementTimeout);
        checkTimeout(problems, "writer lease", writerLease);
        if (tolerableCheckpointFailures < 0) {
            problems.add("tolerable checkpoint failures " + tolerableCheckpointFailures + " is negative: use 0 or more");
        }
        return problems;
    }

    private static void checkTableName(List<String> problems, String setting, String name) {
        if (!SqlIdentifiers.isQualifiedName(name)) {
            problems.add(SqlIdentifiers.tableNameProblem(setting, name));
        }
    }

    private static void checkTimeout(List<String> problems, String name, Duration timeout) {
        if (timeout == null || timeout.toMillis() < 1 || timeout.toMillis() > Integer.MAX_VALUE) {
            problems.add(name + " " + timeout + " is out of range: use 1 ms to 24 days (a timeout bounds"
                    + " every wait, so that a stuck lock becomes a restart instead of a hang)");
        }
    }

    private PostgresSinkConfig validConfig(List<String> problems, String prefix) {
        if (!problems.isEmpty()) {
            throw new IllegalArgumentException("invalid PostgreSQL sink settings:\n  - " + String.join("\n  - ", problems));
        }
        return new PostgresSinkConfig(jdbcUrl, user, password, table, rejectsTable, commitLogTable, runsTable,
                writersTable, effectFunction, prefix, batchSize, lockTimeout, statementTimeout,
                tolerableCheckpointFailures, writerLease, PostgresSinkConfig.NO_RUN);
    }
}
