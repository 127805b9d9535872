package io.onceflow.sink.postgres.options;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * The PostgreSQL sink's five tables and its business effect (function and keys): each name is {@code name} or
 * {@code schema.name}, a plain unquoted identifier (names are put into SQL text, which cannot bind
 * identifiers). The defaults are the {@code DEFAULT_*} constants; {@link #problems()} checks the
 * names and that no two name the same table.
 *
 * @param events one row per message id (the inbox, with an effect)
 * @param rejects one row per message id the database refused
 * @param commitLog one row per committed transaction; may be shared by sinks
 * @param runs one row per start of a job (a run); may be shared by sinks
 * @param writers which attempt of which run holds each writer subtask; may be shared by sinks
 * @param effectFunction the {@code EffectFunction} to call once per new message id, or null for none
 * @param effectKeys the function naming what an effect touches ({@code EffectFunction}, "Keys"), or
 *     null: effects then lock only their own events rows
 * @param allowTriggersThatMayStallCheckpoints whether a start accepts the user's triggers on the
 *     tables a checkpoint's transaction writes (false by default): a prepared transaction keeps
 *     every row lock its triggers took until its checkpoint completes, so a trigger that locks a
 *     row other subtasks write too (a counter, a summary) stalls the checkpoint; see the PostgreSQL
 *     guide, "What a checkpoint's transaction may lock"
 */
public record PostgresTableOptions(String events, String rejects, String commitLog, String runs, String writers,
        String effectFunction, String effectKeys, boolean allowTriggersThatMayStallCheckpoints)
        implements Serializable {
    public static final String DEFAULT_EVENTS = "onceflow_events";
    public static final String DEFAULT_REJECTS = "onceflow_rejects";
    public static final String DEFAULT_COMMIT_LOG = "onceflow_commit_log";
    public static final String DEFAULT_RUNS = "onceflow_runs";
    public static final String DEFAULT_WRITERS = "onceflow_writers";
    /** The effect queue is named after the events table: {@code <events>_effect_queue}. */
    public static final String EFFECT_QUEUE_SUFFIX = "_effect_queue";
    /** PostgreSQL truncates identifiers at 63 bytes. */
    public static final int MAX_IDENTIFIER_LENGTH = 63;
    /** The events table's own name (after the schema) may be this long, so that its queue's fits. */
    public static final int MAX_EVENTS_NAME_LENGTH = MAX_IDENTIFIER_LENGTH - EFFECT_QUEUE_SUFFIX.length();

    /** The default tables, without an effect. */
    public static PostgresTableOptions defaults() {
        return new PostgresTableOptions(DEFAULT_EVENTS, DEFAULT_REJECTS, DEFAULT_COMMIT_LOG, DEFAULT_RUNS,
                DEFAULT_WRITERS, null, null, false);
    }

    public PostgresTableOptions withEvents(String name) {
        return new PostgresTableOptions(name, rejects, commitLog, runs, writers, effectFunction, effectKeys,
                allowTriggersThatMayStallCheckpoints);
    }

    public PostgresTableOptions withRejects(String name) {
        return new PostgresTableOptions(events, name, commitLog, runs, writers, effectFunction, effectKeys,
                allowTriggersThatMayStallCheckpoints);
    }

    public PostgresTableOptions withCommitLog(String name) {
        return new PostgresTableOptions(events, rejects, name, runs, writers, effectFunction, effectKeys,
                allowTriggersThatMayStallCheckpoints);
    }

    public PostgresTableOptions withRuns(String name) {
        return new PostgresTableOptions(events, rejects, commitLog, name, writers, effectFunction, effectKeys,
                allowTriggersThatMayStallCheckpoints);
    }

    public PostgresTableOptions withWriters(String name) {
        return new PostgresTableOptions(events, rejects, commitLog, runs, name, effectFunction, effectKeys,
                allowTriggersThatMayStallCheckpoints);
    }

    /** @param function {@code name} or {@code schema.name}; null for none */
    public PostgresTableOptions withEffectFunction(String function) {
        return new PostgresTableOptions(events, rejects, commitLog, runs, writers, function, effectKeys,
                allowTriggersThatMayStallCheckpoints);
    }

    /** @param function {@code name} or {@code schema.name}; null for none */
    public PostgresTableOptions withEffectKeys(String function) {
        return new PostgresTableOptions(events, rejects, commitLog, runs, writers, effectFunction, function,
                allowTriggersThatMayStallCheckpoints);
    }

    /**
     * @param allow true to accept the user's triggers on the tables a checkpoint's transaction
     *     writes, at the risk that one locking a shared row stalls every checkpoint
     */
    public PostgresTableOptions withTriggersThatMayStallCheckpoints(boolean allow) {
        return new PostgresTableOptions(events, rejects, commitLog, runs, writers, effectFunction, effectKeys, allow);
    }

    /** The five table names, in DDL order; a name not set (null) stays null. */
    public List<String> tableNames() {
        return Arrays.asList(events, rejects, commitLog, runs, writers);
    }

    /** Whether {@code name} is {@code name} or {@code schema.name}, each part a plain identifier. */
    public static boolean isValidName(String name) {
        return SqlIdentifiers.isQualifiedName(name);
    }

    /** Unquoted identifiers fold to lower case, so {@code Events} and {@code events} are one table. */
    public static boolean sameTable(String name, String other) {
        return name != null && other != null && name.toLowerCase(Locale.ROOT).equals(other.toLowerCase(Locale.ROOT));
    }

    /** Every problem with these names, each saying what to do; empty when they are valid. */
    public List<String> problems() {
        List<String> problems = new ArrayList<>();
        List<String> settings = List.of("table", "rejects table", "commit log table", "runs table", "writers table");
        for (int i = 0; i < settings.size(); i++) {
            if (!isValidName(tableNames().get(i))) {
                problems.add(SqlIdentifiers.tableNameProblem(settings.get(i), tableNames().get(i)));
            }
        }
        String clash = sameTableProblem();
        if (clash != null) {
            problems.add(clash);
        }
        if (effectFunction != null && !isValidName(effectFunction)) {
            problems.add(SqlIdentifiers.functionNameProblem("effect function", effectFunction) + ", or null for none");
        }
        if (effectKeys != null && !isValidName(effectKeys)) {
            problems.add(SqlIdentifiers.functionNameProblem("effect keys function", effectKeys) + ", or null for none");
        }
        if (effectKeys != null && effectFunction == null) {
            problems.add("an effect keys function (postgres.effect.keys) is set without an effect function"
                    + " (postgres.effect.function): set both, or neither");
        }
        if (isValidName(events) && events.substring(events.indexOf('.') + 1).length() > MAX_EVENTS_NAME_LENGTH) {
            problems.add("table name '" + events + "' is too long: its effect queue " + events
                    + EFFECT_QUEUE_SUFFIX + " must fit PostgreSQL's " + MAX_IDENTIFIER_LENGTH + " characters; use at most "
                    + MAX_EVENTS_NAME_LENGTH + " (after the schema)");
        }
        return problems;
    }

    /** A message naming the first name used for two tables, or null. */
    private String sameTableProblem() {
        List<String> names = tableNames();
        for (int i = 1; i < names.size(); i++) {
            for (int j = 0; j < i; j++) {
                if (sameTable(names.get(i), names.get(j))) {
                    return "table name '" + names.get(i) + "' is used for two of the sink's tables (events, rejects,"
                            + " commit log, runs, writers): give each its own";
                }
            }
        }
        return null;
    }

    /**
     * These options, checked.
     *
     * @throws IllegalArgumentException listing every problem
     */
    public PostgresTableOptions validated() {
        List<String> problems = problems();
        if (!problems.isEmpty()) {
            throw new IllegalArgumentException(String.join("; ", problems));
        }
        return this;
    }
}
