package io.onceflow.sink.postgres.internal;

import io.onceflow.sink.postgres.internal.EffectWorker;
import io.onceflow.sink.postgres.options.SqlIdentifiers;
import io.onceflow.sink.postgres.internal.RowIsolation;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.Optional;

/**
 * A business effect: a SQL function of the user's that the PostgreSQL sink calls exactly once per
 * message id, its changes committed in the same transaction as the result that records them in the
 * id's row of the events table, which so serves as the transactional inbox. Configured with
 * {@code PostgresSinkBuilder.setEffectFunction} ({@code postgres.effect.function}).
 *
 * <pre>{@code
 * CREATE FUNCTION ledger.apply_payment(message_id text, payload jsonb) RETURNS jsonb
 * }</pre>
 *
 * <p><b>When.</b> The statement that inserts a new id's row also queues its effect (the table
 * {@code <events>_effect_queue}); a duplicate that escapes dedup (its TTL expired, a replay from
 * old offsets) raises {@code deliveries} and queues nothing. Once the row has committed (with its
 * checkpoint, exactly-once), an effect worker of the sink (one per writer subtask, off the task
 * thread, {@link EffectWorker}) takes queued effects in source order (partition, offset), calls
 * the function for each in that order, stores its result in the row's {@code result} column
 * ({@code jsonb}; a SQL NULL result is stored as JSON {@code null}; SQL NULL in the column means
 * pending) and removes it from the queue, all in one transaction. No effect runs inside the
 * checkpoint's prepared transaction, so none holds a lock across a checkpoint barrier.
 *
 * <p><b>Keys.</b> With {@code PostgresSinkBuilder.setEffectKeys} ({@code postgres.effect.keys}) a
 * second function {@code name(message_id text, payload jsonb) RETURNS text[]} names what each
 * effect changes (an account; both accounts of a transfer). A worker locks the keys of its batch in
 * one global order before it calls the effect function: effects on other keys run in parallel on
 * other workers, and two effects on shared keys never deadlock. Without keys, effects that change
 * shared rows in different orders may deadlock; PostgreSQL detects it and the batch is retried.
 *
 * <p><b>Order.</b> Each source partition's effects are applied in offset order, one batch at a
 * time, at any parallelism with exactly-once (a batch waits for the writers that still have to
 * commit an earlier offset); effects of different partitions are not ordered. A team that needs
 * per-account order has the producer key messages by account (docs/effects.md, "Order").
 *
 * <p>Results:
 *
 * <ul>
 *   <li>{@code {"status":"rejected","reason":"..."}}: a business rejection (unknown account,
 *       insufficient funds). Recorded, never retried; counted by the {@code effectsRejected}
 *       metric.
 *   <li>anything else means applied; {@code {"status":"applied", ...}} is recommended. Counted by
 *       {@code effectsApplied}.
 *   <li>{@code {"status":"failed","sqlstate":"...","error":"...","sink":"..."}} is written by the sink, not the
 *       function, when the function (or the keys function) raised an error about its input
 *       (SQLSTATE classes 22, 23, 54, P0 e.g. {@code RAISE EXCEPTION}, 2F, 38, 39, 21, 27, 0A):
 *       the function's changes for that id are rolled back, the message is consumed, and the job
 *       goes on. Counted by {@code effectsFailed}; the effect stays in the queue, marked failed
 *       (the {@code effectsAwaitingRedrive} gauge), until an operator re-drives it once the cause
 *       is fixed ({@code bin/onceflow effects retry-failed}: applied exactly once) or skips it with a
 *       reason ({@code effects skip}). Do not return this status.
 *   <li>{@code {"status":"skipped","reason":"...","skipped":<the failure>}} is written by {@code
 *       effects skip}, not the function.
 * </ul>
 *
 * <p>Any other error says nothing about the message (a cancel or statement timeout, a lock timeout,
 * a deadlock, a serialization failure, a lost connection, a server shutting down, a missing table
 * or privilege): the batch's transaction is rolled back and tried again with backoff, and the
 * worker's log line says what to fix. The effects wait meanwhile, in the queue; the {@code
 * effectsQueued} and {@code oldestQueuedEffectSeconds} gauges show the backlog.
 *
 * <p>The contract the function must keep:
 *
 * <ul>
 *   <li>deterministic in {@code (message_id, payload)} and the database's state: a retry calls it
 *       again for the same input, and so does isolating a failing id in a batch (those calls are
 *       rolled back);
 *   <li>changes only the database: an HTTP call or an e-mail from it would happen again on every
 *       retry, and even for calls that are rolled back;
 *   <li>makes no change when it rejects, so that a rejection leaves the data as it was;
 *   <li>changes only rows its keys cover, when keys are declared;
 *   <li>runs inside the sink's transaction: no {@code COMMIT}, no session-level advisory locks
 *       ({@code pg_advisory_xact_lock} is fine), no writes to the events table or its queue (the
 *       sink stores the result there);
 *   <li>is {@code VOLATILE} (the default of {@code CREATE FUNCTION}; checked at start): PostgreSQL
 *       may call an {@code IMMUTABLE} or {@code STABLE} function fewer times than asked, read-only.
 * </ul>
 *
 * <p>A queued effect belongs to the sink ({@code postgres.sink.prefix}) and the function that queued
 * it: no other sink's worker or re-drive applies it, and a start with another function while it is
 * queued is refused until the operator re-binds it (docs/effects.md, "Bound to a sink and a function").
 *
 * <p>A batch's calls run in one statement, within {@code postgres.statement.timeout}; a batch that
 * fails for another reason than a message's data is retried one effect at a time at first, and an
 * effect that fails alone sets its partition aside for a while, so the others go on.
 *
 * <p>What stays at-least-once: the calls themselves (and the metrics that count them) repeat after
 * a failure, only the committed result is once; the Kafka output of a duplicate whose id expired
 * from dedup; anything outside PostgreSQL. The metrics count executions, like {@code rowsRejected}.
 */
public final class EffectFunction {
    /** The status with which a function rejects a message. */
    public static final String REJECTED = "rejected";
    /** The status the sink records when the function raised an error about the message. */
    public static final String FAILED = "failed";
    /** The status of a failed effect that an operator skipped ({@code bin/onceflow effects skip}), with the reason. */
    public static final String SKIPPED = "skipped";

    private EffectFunction() {}

    /**
     * What keeps {@code function} from being called as an effect by the current user, with the fix.
     *
     * @param function {@code name} or {@code schema.name}, a validated identifier
     * @return empty if {@code function(text, jsonb)} is a {@code VOLATILE} function returning one
     *     {@code jsonb} that the user may execute; else one line starting with the function's signature
     */
    public static Optional<String> problem(Connection connection, String function) throws SQLException {
        return problem(connection, function, "jsonb", "RETURN jsonb_build_object('status', 'applied')", true);
    }

    /**
     * What keeps {@code function} from being called as the effect keys function ({@code
     * postgres.effect.keys}), as {@link #problem}: it must return {@code text[]}.
     */
    public static Optional<String> keysProblem(Connection connection, String function) throws SQLException {
        return problem(connection, function, "text[]", "RETURN ARRAY[payload->>'account']", false);
    }

    /**
     * @param mustBeVolatile whether it must be {@code VOLATILE}: an effect changes the database, and
     *     PostgreSQL may call an {@code IMMUTABLE} or {@code STABLE} function fewer times than asked (or
     *     fold it into a constant), and runs it with a read-only snapshot
     */
    private static Optional<String> problem(Connection connection, String function, String returns, String body,
            boolean mustBeVolatile) throws SQLException {
        SqlIdentifiers.requireFunctionName("function", function);
        String signature = function + "(text, jsonb)";
        String template = createTemplate(function, returns, body);
        try (PreparedStatement query = connection.prepareStatement("SELECT p.prokind,"
                + " p.prorettype = ?::regtype AND NOT p.proretset, pg_get_function_result(p.oid),"
                + " has_function_privilege(p.oid, 'EXECUTE'), p.provolatile FROM pg_proc p"
                + " WHERE p.oid = to_regprocedure(?)")) {
            query.setString(1, returns);
            query.setString(2, function + "(text,jsonb)");
            try (ResultSet found = query.executeQuery()) {
                if (!found.next()) {
                    return Optional.of(signature + " does not exist" + otherSignatures(connection, function)
                            + ": create it with the parameters (message_id text, payload jsonb), e.g. " + template);
                }
                if (!"f".equals(found.getString(1))) {
                    return Optional.of(signature + " is not a plain function (a procedure or an aggregate): create"
                            + " it as " + template);
                }
                if (!found.getBoolean(2)) {
                    return Optional.of(signature + " returns " + found.getString(3) + ", not " + returns + ": CREATE OR"
                            + " REPLACE cannot change the result type, so DROP FUNCTION " + signature
                            + " and create it as " + template);
                }
                if (mustBeVolatile && !"v".equals(found.getString(5))) {
                    return Optional.of(signature + " is " + ("i".equals(found.getString(5)) ? "IMMUTABLE" : "STABLE")
                            + ", but an effect changes the database, which only a VOLATILE function may do reliably"
                            + " (PostgreSQL may skip or cache calls of the others): ALTER FUNCTION " + signature
                            + " VOLATILE");
                }
                if (!found.getBoolean(4)) {
                    return Optional.of("the user may not execute " + signature + ": GRANT EXECUTE ON FUNCTION "
                            + signature + " TO " + currentUser(connection));
                }
                return Optional.empty();
            }
        }
    }

    /**
     * A {@code CREATE FUNCTION} statement in one line, to start from.
     *
     * @param function {@code name} or {@code schema.name}
     */
    public static String createTemplate(String function) {
        return createTemplate(function, "jsonb", "RETURN jsonb_build_object('status', 'applied')");
    }

    private static String createTemplate(String function, String returns, String body) {
        return "CREATE FUNCTION " + function + "(message_id text, payload jsonb) RETURNS " + returns
                + " LANGUAGE plpgsql AS $$ BEGIN /* " + ("jsonb".equals(returns) ? "change your tables here; no COMMIT"
                        : "the keys the effect changes, e.g. its accounts") + " */ " + body + "; END $$;";
    }

    /**
     * For the sink's start: the effect function and, if set, the keys function.
     *
     * @param keysFunction null for none
     * @throws IllegalStateException naming the setting and the fix, if {@link #problem} or {@link
     *     #keysProblem} finds one
     */
    public static void check(Connection connection, String function, String keysFunction) throws SQLException {
        Optional<String> problem = problem(connection, function);
        if (problem.isPresent()) {
            throw new IllegalStateException("the effect function (postgres.effect.function) " + problem.get());
        }
        Optional<String> keysProblem = keysFunction == null ? Optional.empty() : keysProblem(connection, keysFunction);
        if (keysProblem.isPresent()) {
            throw new IllegalStateException("the effect keys function (postgres.effect.keys) " + keysProblem.get());
        }
    }

    /** E.g. " (there is ledger.apply_payment(integer))", or nothing if no function has the name. */
    private static String otherSignatures(Connection connection, String function) throws SQLException {
        int dot = function.indexOf('.');
        // unquoted identifiers fold to lower case; an unqualified name is looked up on the search_path
        String namespace = dot < 0 ? "pg_function_is_visible(p.oid)" : "p.pronamespace = to_regnamespace(?)";
        try (PreparedStatement query = connection.prepareStatement("SELECT string_agg(p.oid::regprocedure::text, ', '"
                + " ORDER BY p.oid) FROM pg_proc p WHERE p.proname = lower(?) AND " + namespace)) {
            query.setString(1, function.substring(dot + 1));
            if (dot >= 0) {
                query.setString(2, function.substring(0, dot));
            }
            try (ResultSet others = query.executeQuery()) {
                others.next();
                String found = others.getString(1);
                return found == null ? "" : " (there is " + found + ")";
            }
        }
    }

    private static String currentUser(Connection connection) throws SQLException {
        try (PreparedStatement query = connection.prepareStatement("SELECT current_user");
                ResultSet user = query.executeQuery()) {
            user.next();
            return user.getString(1);
        }
    }
}
