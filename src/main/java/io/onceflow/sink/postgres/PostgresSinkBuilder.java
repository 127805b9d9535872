package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.internal.EffectFunction;
import io.onceflow.sink.postgres.options.StartMode;
import io.onceflow.sink.postgres.options.EffectResultsTopic;
import io.onceflow.sink.postgres.options.PostgresWriterOptions;
import io.onceflow.sink.postgres.options.PostgresTableOptions;
import io.onceflow.sink.postgres.options.PostgresConnectionOptions;
import io.onceflow.api.Event;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.TransactionId;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.apache.flink.api.connector.sink2.Sink;

/**
 * Builds the run registry of a {@link PostgresSink} (exactly-once), or an at-least-once sink with the
 * same upsert. Settings come in three groups, as {@link PostgresConnectionOptions},
 * {@link PostgresTableOptions} and {@link PostgresWriterOptions}; the single setters change one of
 * them.
 *
 * <pre>{@code
 * PostgresSink sink = PostgresSink.builder()
 *         .setJdbcUrl("jdbc:postgresql://db:5432/onceflow")
 *         .setUser("onceflow")
 *         .setPassword(secret)
 *         .setSinkPrefix("orders_pg")
 *         .build()                                        // the run registry
 *         .startRun(parallelism, StartMode.FRESH, jobName) // checks, registers: the proof
 *         .sink();
 * }</pre>
 *
 * <p>{@link #build()} and {@link #buildAtLeastOnce()} check every setting and report all problems
 * at once, each with what to do. The password never appears in messages or {@code toString()}.
 */
public final class PostgresSinkBuilder {
    private String jdbcUrl;
    private String user;
    private String password = "";
    private PostgresTableOptions tables = PostgresTableOptions.defaults();
    private PostgresWriterOptions writer = PostgresWriterOptions.defaults();
    private String sinkPrefix;
    private int tolerableCheckpointFailures;
    private EffectResultsTopic effectResults;

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

    /** The URL, user and password at once. */
    public PostgresSinkBuilder setConnection(PostgresConnectionOptions connection) {
        return setJdbcUrl(connection.jdbcUrl()).setUser(connection.user()).setPassword(connection.password());
    }

    /** All tables and the effect function at once; {@link PostgresTableOptions#defaults()} by default. */
    public PostgresSinkBuilder setTables(PostgresTableOptions tables) {
        this.tables = tables;
        return this;
    }

    /** All writer tuning at once; {@link PostgresWriterOptions#defaults()} by default. */
    public PostgresSinkBuilder setWriterOptions(PostgresWriterOptions writer) {
        this.writer = writer;
        return this;
    }

    /** The event table, {@code table} or {@code schema.table}; default {@value PostgresTableOptions#DEFAULT_EVENTS}. */
    public PostgresSinkBuilder setTable(String table) {
        return setTables(tables.withEvents(table));
    }

    /** The table of rows the database refused; default {@value PostgresTableOptions#DEFAULT_REJECTS}. */
    public PostgresSinkBuilder setRejectsTable(String rejectsTable) {
        return setTables(tables.withRejects(rejectsTable));
    }

    /** The commit log table; default {@value PostgresTableOptions#DEFAULT_COMMIT_LOG}. May be shared by sinks. */
    public PostgresSinkBuilder setCommitLogTable(String commitLogTable) {
        return setTables(tables.withCommitLog(commitLogTable));
    }

    /** The table of runs (job submissions); default {@value PostgresTableOptions#DEFAULT_RUNS}. May be shared by sinks. */
    public PostgresSinkBuilder setRunsTable(String runsTable) {
        return setTables(tables.withRuns(runsTable));
    }

    /** The table of writer claims; default {@value PostgresTableOptions#DEFAULT_WRITERS}. May be shared by sinks. */
    public PostgresSinkBuilder setWritersTable(String writersTable) {
        return setTables(tables.withWriters(writersTable));
    }

    /**
     * A business effect: the SQL function {@code name(message_id text, payload jsonb) RETURNS jsonb}
     * ({@code name} or {@code schema.name}) to call once per message id, with its result stored in
     * the id's row's {@code result} column in the same transaction (see
     * {@link EffectFunction} for the contract); none (null) by default. Without one, each batch is a
     * single upsert.
     */
    public PostgresSinkBuilder setEffectFunction(String effectFunction) {
        return setTables(tables.withEffectFunction(effectFunction));
    }

    /**
     * What each effect changes: the SQL function {@code name(message_id text, payload jsonb)
     * RETURNS text[]} returning its keys (for a transfer, both accounts). Effects take a lock per
     * key, in one global order, before the effect function runs: effects on disjoint keys run in
     * parallel, and two effects on shared keys never deadlock. None (null) by default: each effect
     * then locks only its own row, and effects that change shared rows may deadlock (detected by
     * PostgreSQL and retried). See {@link EffectFunction}, "Keys".
     */
    public PostgresSinkBuilder setEffectKeys(String effectKeys) {
        return setTables(tables.withEffectKeys(effectKeys));
    }

    /**
     * A Kafka topic for the effects' outcomes, published exactly once, per source partition in the
     * order they were decided; none (null) by default. Needs an effect function.
     */
    public PostgresSinkBuilder setEffectResults(EffectResultsTopic effectResults) {
        this.effectResults = effectResults;
        return this;
    }

    /**
     * Whether a start accepts the user's triggers on the tables a checkpoint's transaction writes
     * (the events, rejects and commit log tables and the effect queue); false by default, and a
     * start then refuses naming them. A prepared transaction keeps every row lock its triggers took
     * until its checkpoint completes: a trigger that updates a row other subtasks need before their
     * barrier (a counter, a summary) stalls the checkpoint, and after the lock timeout the job
     * restarts into the same wait. Opt in only for triggers that lock rows of their own message id.
     */
    public PostgresSinkBuilder setAllowTriggersThatMayStallCheckpoints(boolean allow) {
        return setTables(tables.withTriggersThatMayStallCheckpoints(allow));
    }

    /**
     * Required for {@link #build()}: 1 to 40 of {@code a-z A-Z 0-9 _}, stable across restarts and
     * upgrades of the job, and unique among the jobs writing to the same database.
     */
    public PostgresSinkBuilder setSinkPrefix(String sinkPrefix) {
        this.sinkPrefix = sinkPrefix;
        return this;
    }

    /**
     * Distinct ids per INSERT statement, 1 to {@value PostgresWriterOptions#MAX_BATCH_SIZE}; default
     * {@value PostgresWriterOptions#DEFAULT_BATCH_SIZE}.
     */
    public PostgresSinkBuilder setBatchSize(int batchSize) {
        return setWriterOptions(writer.withBatchSize(batchSize));
    }

    /** The longest wait for a row lock (PostgreSQL {@code lock_timeout}); default 30 s. */
    public PostgresSinkBuilder setLockTimeout(Duration lockTimeout) {
        return setWriterOptions(writer.withLockTimeout(lockTimeout));
    }

    /** The longest statement (PostgreSQL {@code statement_timeout}); default 120 s. */
    public PostgresSinkBuilder setStatementTimeout(Duration statementTimeout) {
        return setWriterOptions(writer.withStatementTimeout(statementTimeout));
    }

    /** See {@link PostgresWriterOptions#writerLease()}; default 30 s. */
    public PostgresSinkBuilder setWriterLease(Duration writerLease) {
        return setWriterOptions(writer.withWriterLease(writerLease));
    }

    /**
     * How many bytes of events a writer attempt holds in memory before its first checkpoint barrier,
     * where it claims its subtask and may write; beyond that it spills them to a local file until
     * the barrier. Default {@value PostgresWriterOptions#DEFAULT_HELD_EVENTS_MEMORY_BYTES}; 0 spills
     * every one.
     */
    public PostgresSinkBuilder setHeldEventsMemoryBytes(int bytes) {
        return setWriterOptions(writer.withHeldEventsMemoryBytes(bytes));
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

    /** Whether {@code sinkPrefix} is 1 to 40 of {@code a-z A-Z 0-9 _}. */
    public static boolean isValidSinkPrefix(String sinkPrefix) {
        return sinkPrefix != null && TransactionId.SINK_PREFIX.matcher(sinkPrefix).matches();
    }

    /**
     * The run registry of the exactly-once sink: registering a run there is the only way to obtain
     * the sink ({@link PostgresRunRegistry#startRun}), so that no job can write without the start
     * checks and the fence.
     *
     * @throws IllegalArgumentException listing every invalid setting
     */
    public PostgresRunRegistry build() {
        List<String> problems = commonProblems();
        if (!isValidSinkPrefix(sinkPrefix)) {
            problems.add("sink prefix '" + sinkPrefix + "' is not valid: use 1 to 40 of the characters a-z, A-Z, 0-9"
                    + " and '_', stable across restarts of the job and unique among jobs using the database");
        }
        return new PostgresRunRegistry(validConfig(problems, sinkPrefix));
    }

    /**
     * An at-least-once sink with the same upsert: rows become visible batch by batch (autocommit),
     * and every row is written before a checkpoint completes. A restart replays rows written after
     * the last checkpoint, which raises their {@code deliveries}. No sink prefix, commit log or
     * prepared transactions are needed. Check the database first with
     * {@link PostgresRunRegistry#startAtLeastOnce}.
     *
     * @throws IllegalArgumentException listing every invalid setting
     */
    public Sink<Event> buildAtLeastOnce() {
        List<String> problems = commonProblems();
        if (tables.effectFunction() == null) {
            return new PostgresAtLeastOnceSink(validConfig(problems, null));
        }
        // its queued effects are bound to the sink (docs/effects.md)
        if (!isValidSinkPrefix(sinkPrefix)) {
            problems.add("sink prefix '" + sinkPrefix + "' is not valid, and an effect function needs one: use 1 to 40"
                    + " of the characters a-z, A-Z, 0-9 and '_', stable across restarts of the job and unique among jobs"
                    + " using the database");
        }
        return new PostgresAtLeastOnceSink(validConfig(problems, sinkPrefix));
    }

    private List<String> commonProblems() {
        List<String> problems = new ArrayList<>(new PostgresConnectionOptions(jdbcUrl, user, password).problems());
        problems.addAll(tables.problems());
        problems.addAll(writer.problems());
        if (tolerableCheckpointFailures < 0) {
            problems.add("tolerable checkpoint failures " + tolerableCheckpointFailures + " is negative: use 0 or more");
        }
        if (effectResults != null) {
            problems.addAll(effectResults.problems());
            if (tables.effectFunction() == null) {
                problems.add("an effect results topic is set without an effect function (postgres.effect.function):"
                        + " set both, or neither");
            }
        }
        return problems;
    }

    private PostgresSinkConfig validConfig(List<String> problems, String prefix) {
        if (!problems.isEmpty()) {
            throw new IllegalArgumentException("invalid PostgreSQL sink settings:\n  - " + String.join("\n  - ", problems));
        }
        return new PostgresSinkConfig(new PostgresConnectionOptions(jdbcUrl, user, password), tables, writer, prefix,
                tolerableCheckpointFailures, effectResults, PostgresSinkConfig.NO_RUN);
    }
}
