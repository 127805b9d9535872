package io.onceflow.testkit;

import io.onceflow.testing.TestPostgres;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * What one {@link JobUnderTest} run left, per id, once the job finished: the committed output
 * records (keyed by the output event's message id), the committed dead letters (by the {@link
 * TestRecord#label() label} of the input record they came from, whatever their key), and the rows
 * of the PostgreSQL events table with their effect results. The lookups throw an {@link
 * AssertionError} saying what the id did get instead, so that a test reads as its expectations:
 *
 * <pre>{@code
 * assertEquals("{\"amount\":10}", outcomes.outputOf("pay-1"));
 * assertEquals("REJECTED_BY_PROCESSOR", outcomes.deadLetterOf("pay-2").reason());
 * assertEquals("{\"status\": \"applied\"}", outcomes.rowOf("pay-1").result());
 * outcomes.assertExactlyOnce();
 * }</pre>
 */
public final class Outcomes {
    private final Map<String, List<String>> outputsById;
    private final Map<String, List<DeadLetter>> deadLettersByLabel;
    private final Map<String, Row> rowsById;
    private final Map<String, List<String>> publishedById;
    private final List<String> problems;
    private final TestPostgres.TestDatabase database;

    Outcomes(Map<String, List<String>> outputsById, Map<String, List<DeadLetter>> deadLettersByLabel,
            Map<String, Row> rowsById, Map<String, List<String>> publishedById, List<String> problems,
            TestPostgres.TestDatabase database) {
        this.outputsById = outputsById;
        this.deadLettersByLabel = deadLettersByLabel;
        this.rowsById = rowsById;
        this.publishedById = publishedById;
        this.problems = List.copyOf(problems);
        this.database = database;
    }

    /**
     * A dead letter: its {@code onceflow.dlq.reason} code, its {@code onceflow.dlq.error} text, its
     * value. An event your processor emitted nothing for has one too: reason {@code
     * FILTERED_BY_PROCESSOR}, a null payload.
     */
    public record DeadLetter(String reason, String error, String payload) {}

    /**
     * A row of the events table: its payload as PostgreSQL's {@code jsonb} prints it (keys sorted by
     * length, then bytes; {@code ": "} and {@code ", "} between), how many deliveries the upsert
     * counted, and the effect function's result ({@code jsonb} text), null without an effect.
     */
    public record Row(String payload, int deliveries, String result) {}

    /**
     * The value of the one committed output record of {@code id}.
     *
     * @throws AssertionError if {@code id} has no output record, or more than one
     */
    public String outputOf(String id) {
        List<String> outputs = outputsById.getOrDefault(id, List.of());
        if (outputs.size() != 1) {
            throw new AssertionError("id " + id + ": " + outputs.size() + " output records, expected 1; " + describe(id));
        }
        return outputs.get(0);
    }

    /**
     * The dead letter of the input record labelled {@code label} (its message id for {@link
     * TestRecord#of}); the first, if the record was sent more than once and is poison each time.
     * A record your processor filtered (emitted nothing for) has its {@code FILTERED_BY_PROCESSOR}
     * record here.
     *
     * @throws AssertionError if that record has no dead letter
     */
    public DeadLetter deadLetterOf(String label) {
        List<DeadLetter> deadLetters = deadLettersByLabel.getOrDefault(label, List.of());
        if (deadLetters.isEmpty()) {
            throw new AssertionError(label + ": no dead letter; " + describe(label));
        }
        return deadLetters.get(0);
    }

    /**
     * The row of {@code id} in the events table.
     *
     * @throws AssertionError if {@code id} has no row
     * @throws IllegalStateException if the run had no PostgreSQL sink
     */
    public Row rowOf(String id) {
        requireDatabase();
        Row row = rowsById.get(id);
        if (row == null) {
            throw new AssertionError("id " + id + ": no row in the events table; " + describe(id));
        }
        return row;
    }

    /**
     * The status ({@code applied}, {@code rejected}, {@code failed}) of the one outcome of {@code id}
     * published on the results topic ({@link JobUnderTest#withEffectResults()}).
     *
     * @throws AssertionError if {@code id} has no published outcome, or more than one
     */
    public String publishedOutcomeOf(String id) {
        List<String> statuses = publishedById.getOrDefault(id, List.of());
        if (statuses.size() != 1) {
            throw new AssertionError("id " + id + ": " + statuses.size() + " outcomes published " + statuses
                    + ", expected 1; " + describe(id));
        }
        return statuses.get(0);
    }

    /** The ids that have at least one committed output record. */
    public Set<String> outputIds() {
        return Collections.unmodifiableSet(outputsById.keySet());
    }

    /** The labels of the input records that have at least one dead letter (a filter record included). */
    public Set<String> deadLetterLabels() {
        return Collections.unmodifiableSet(deadLettersByLabel.keySet());
    }

    /** The ids that have a row in the events table (none without the PostgreSQL sink). */
    public Set<String> rowIds() {
        return Collections.unmodifiableSet(rowsById.keySet());
    }

    /**
     * Every breach of once-per-id the run shows, one line each: an id with more than one output
     * record, an input record with more than one dead letter, a row delivered more than once (a
     * duplicate that reached the sink); with a results topic, an outcome published twice, missing or
     * out of its source partition's order. Empty when the run was exactly once.
     */
    public List<String> problems() {
        return problems;
    }

    /** @throws AssertionError listing {@link #problems()}, if there are any */
    public void assertExactlyOnce() {
        if (!problems.isEmpty()) {
            throw new AssertionError("not exactly once:\n  " + String.join("\n  ", problems));
        }
    }

    /**
     * A connection to the run's database (close it), for the test's own checks of its tables.
     *
     * @throws IllegalStateException if the run had no PostgreSQL sink
     */
    public Connection connect() throws SQLException {
        return requireDatabase().connect();
    }

    /** The rows of {@code query} in the run's database, each row's columns joined by single spaces. */
    public List<String> query(String query) throws SQLException {
        return requireDatabase().rows(query);
    }

    private TestPostgres.TestDatabase requireDatabase() {
        if (database == null) {
            throw new IllegalStateException("the run had no PostgreSQL sink: call withPostgres(), withSql(...)"
                    + " or withEffect(...) on the job before run(...)");
        }
        return database;
    }

    /** What {@code id} did get, for the message of a failed lookup. */
    private String describe(String id) {
        List<String> got = new ArrayList<>();
        got.add(outputsById.getOrDefault(id, List.of()).size() + " output records");
        for (DeadLetter deadLetter : deadLettersByLabel.getOrDefault(id, List.of())) {
            got.add("dead letter " + deadLetter.reason() + " (" + deadLetter.error() + ")");
        }
        if (database != null) {
            Row row = rowsById.get(id);
            got.add(row == null ? "no row" : "row " + row);
        }
        return "it has " + String.join(", ", got);
    }
}
