package io.onceflow.sink.postgres.internal;

import java.sql.SQLException;
import org.apache.flink.annotation.Internal;

/**
 * Internal. Which errors of an effect are a verdict on the message and which are about the
 * environment. Only the message's own data is a final verdict: a cancel, a timeout, a deadlock, a
 * serialization failure, a lost connection, a server shutting down, a missing privilege or table
 * say nothing about the message, so the effect is tried again (with backoff) and never recorded as
 * the message's failure: a payment is never consumed without its debit because a DBA cancelled a
 * statement.
 */
@Internal
public final class EffectFailures {
    private EffectFailures() {}

    /**
     * What a retried failure of the effect transaction means, for the log.
     *
     * @param functions the effect function, and its keys function if any, as the user named them
     * @param role the session's user
     */
    public static String explain(SQLException e, String functions, String role) {
        String state = e.getSQLState();
        String what = "SQLSTATE " + state + ": " + RowIsolation.describe(e);
        if (SqlStates.INSUFFICIENT_PRIVILEGE.equals(state)) {
            return "the role '" + role + "' lacks a privilege that " + functions + " needs (" + what + "): GRANT it"
                    + " to '" + role + "', or make the function SECURITY DEFINER, owned by a role that has it;"
                    + " the effects wait meanwhile and are applied once it is fixed";
        }
        if (state != null && state.startsWith("42")) {
            return functions + " refers to something that does not exist or cannot be used (" + what + "): fix the"
                    + " function; the effects wait meanwhile";
        }
        if (SqlStates.QUERY_CANCELED.equals(state)) {
            return "a statement of the effects was cancelled, or ran past postgres.statement.timeout (" + what
                    + "): tried again with a smaller batch";
        }
        return what;
    }
}
