package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.internal.commit.PendingEffects;
import io.onceflow.sink.postgres.internal.schema.SqlIdentifiers;
import io.onceflow.sink.postgres.internal.writer.RowIsolation;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.Optional;

/**
 * A business effect: a SQL function of the user's that the PostgreSQL sink calls exactly once per
 * message id, its changes committed in the same transaction as the result that records them in the
 * id's row of the events table, which so serves as the transactional inbox. Configured with
 * {@link PostgresSinkBuilder#setEffectFunction} ({@code postgres.effect.function}).
 *
 * <pre>{@code
 * CREATE FUNCTION ledger.apply_payment(message_id text, payload jsonb) RETURNS jsonb
 * }</pre>
 *
 * <p>The sink calls it only when the id's row is new. Exactly-once: after the checkpoint's
 * transaction that inserted the row has committed, by the committer ({@link PendingEffects} says
 * how, and why not inside the prepared transaction); at-least-once: in the batch's transaction,
 * with the insert. A duplicate that escapes dedup (its TTL expired, a replay from old offsets)
 * raises {@code deliveries} and never runs the effect again. Its result is stored in the row's
 * {@code result} column ({@code jsonb}; a SQL NULL result is stored as JSON {@code null}; a SQL
 * NULL in the column means the call is pending).
 *
 * <p>Results:
 *
 * <ul>
 *   <li>{@code {"status":"rejected","reason":"..."}}: a business rejection (unknown account,
 *       insufficient funds). Recorded, never retried; counted by the {@code effectsRejected}
 *       metric.
 *   <li>anything else means applied; {@code {"status":"applied", ...}} is recommended. Counted by
 *       {@code effectsApplied}.
 *   <li>{@code {"status":"failed","sqlstate":"...","error":"..."}} is written by the sink, not the
 *       function, when the function raised an error about its input (SQLSTATE classes 22, 23, 54,
 *       P0 e.g. {@code RAISE EXCEPTION}, 2F, 38, 39, see {@link RowIsolation#isRowDataError}):
 *       the function's changes for that id are rolled back, the message is consumed and never
 *       retried, and the job goes on. Counted by {@code effectsFailed}. Do not return this status.
 * </ul>
 *
 * <p>Any other error (serialization failure, deadlock, lock or statement timeout, lost connection,
 * a missing table or privilege) is transient or a configuration mistake: the call's transaction is
 * rolled back and tried again (the committer's retry, or a restart from the last checkpoint).
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
 *   <li>runs inside the sink's transaction: no {@code COMMIT}, no session-level advisory locks
 *       ({@code pg_advisory_xact_lock} is fine), no writes to the events table (the statement
 *       that calls it is updating that row).
 * </ul>
 *
 * <p>A batch's calls run in one statement, within the sink's {@code statement_timeout}.
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

    private EffectFunction() {}

    /**
     * What keeps {@code function} from being called as an effect by the current user, with the fix.
     *
     * @param function {@code name} or {@code schema.name}, a validated identifier
     * @return empty if {@code function(text, jsonb)} is a function returning one {@code jsonb} that
     *     the user may execute; else one line starting with the function's signature
     */
    public static Optional<String> problem(Connection connection, String function) throws SQLException {
        SqlIdentifiers.requireFunctionName("effect function", function);
        String signature = function + "(text, jsonb)";
        try (PreparedStatement query = connection.prepareStatement("SELECT p.prokind,"
                + " p.prorettype = 'jsonb'::regtype AND NOT p.proretset, pg_get_function_result(p.oid),"
                + " has_function_privilege(p.oid, 'EXECUTE') FROM pg_proc p WHERE p.oid = to_regprocedure(?)")) {
            query.setString(1, function + "(text,jsonb)");
            try (ResultSet found = query.executeQuery()) {
                if (!found.next()) {
                    return Optional.of(signature + " does not exist" + otherSignatures(connection, function)
                            + ": create it with the parameters (message_id text, payload jsonb), e.g. "
                            + createTemplate(function));
                }
                if (!"f".equals(found.getString(1))) {
                    return Optional.of(signature + " is not a plain function (a procedure or an aggregate): create"
                            + " it as " + createTemplate(function));
                }
                if (!found.getBoolean(2)) {
                    return Optional.of(signature + " returns " + found.getString(3) + ", not jsonb: CREATE OR"
                            + " REPLACE cannot change the result type, so DROP FUNCTION " + signature
                            + " and create it as " + createTemplate(function));
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
        return "CREATE FUNCTION " + function + "(message_id text, payload jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$"
                + " BEGIN /* change your tables here; no COMMIT */ RETURN jsonb_build_object('status', 'applied');"
                + " END $$;";
    }

    /**
     * For the sink's start.
     *
     * @throws IllegalStateException naming the setting and the fix, if {@link #problem} finds one
     */
    public static void check(Connection connection, String function) throws SQLException {
        Optional<String> problem = problem(connection, function);
        if (problem.isPresent()) {
            throw new IllegalStateException("the effect function (postgres.effect.function) " + problem.get());
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
