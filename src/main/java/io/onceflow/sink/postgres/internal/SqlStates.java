package io.onceflow.sink.postgres.internal;

import java.sql.SQLException;
import java.util.Set;
import org.apache.flink.annotation.Internal;

/**
 * Internal. What a PostgreSQL SQLSTATE means to onceflow, in one place: the codes it acts on by
 * name, and the classes it sorts failures into (the row's data, the message's effect, worth another
 * attempt, a lost session). Every other class asks here instead of comparing codes.
 */
@Internal
public final class SqlStates {
    /** insufficient_privilege: a GRANT is missing, or a prepared transaction belongs to another role. */
    public static final String INSUFFICIENT_PRIVILEGE = "42501";
    /** undefined_object: e.g. "prepared transaction with identifier ... does not exist". */
    public static final String UNDEFINED_OBJECT = "42704";
    /** undefined_table. */
    public static final String UNDEFINED_TABLE = "42P01";
    /** lock_not_available: {@code lock_timeout}, or {@code NOWAIT}. */
    public static final String LOCK_NOT_AVAILABLE = "55P03";
    /** query_canceled: a cancel, or {@code statement_timeout}. */
    public static final String QUERY_CANCELED = "57014";

    /** Worth another attempt besides connection exceptions (class 08). */
    private static final Set<String> TRANSIENT = Set.of(
            "40001", // serialization_failure
            "40P01", // deadlock_detected
            LOCK_NOT_AVAILABLE,
            QUERY_CANCELED,
            "55000", // object_not_in_prerequisite_state: "prepared transaction ... is busy" (two committers overlap)
            "57P01", // admin_shutdown
            "57P02", // crash_shutdown
            "57P03", // cannot_connect_now (server starting up)
            "53300"); // too_many_connections

    private SqlStates() {}

    /** Whether {@code e} carries exactly {@code state}. */
    public static boolean is(SQLException e, String state) {
        return state.equals(e.getSQLState());
    }

    /**
     * Whether the session is gone: no SQLSTATE (the driver's own I/O failure), class 08, or 57P01
     * (an administrator, or a failover's fencing, ended it).
     */
    public static boolean isConnectionLost(SQLException e) {
        String state = e.getSQLState();
        return state == null || state.startsWith("08") || "57P01".equals(state);
    }

    /** Whether the same statement may succeed when tried again: a lost connection, a lock, a timeout, a busy server. */
    public static boolean isTransient(SQLException e) {
        String state = e.getSQLState();
        return state != null && (state.startsWith("08") || TRANSIENT.contains(state));
    }

    /**
     * Whether PostgreSQL refused the data of a row rather than failed for a reason of its own:
     * SQLSTATE classes 22 (data exception), 23 (integrity constraint violation), 54 (program limit
     * exceeded, e.g. an index row too large), P0 (raised by PL/pgSQL, e.g. in a trigger), and 2F, 38,
     * 39 (exceptions in SQL or external routines).
     */
    public static boolean isRowDataError(SQLException e) {
        String state = e.getSQLState();
        if (state == null || state.length() != 5) {
            return false;
        }
        return switch (state.substring(0, 2)) {
            case "22", "23", "54", "P0", "2F", "38", "39" -> true;
            default -> false;
        };
    }

    /**
     * Whether an effect function failed because of the message it was given: the data errors of
     * {@link #isRowDataError}, and 21 (a subquery that returns more rows for this payload), 27 (the
     * function changed a row the statement changes) and 0A (a feature this input needs). Not 57014
     * (a cancel or {@code statement_timeout}), 40001, 40P01, 55P03, 53, 57P, 08, 42 (a missing table,
     * column or privilege) or anything else: those are retried.
     */
    public static boolean isAboutTheMessage(SQLException e) {
        String state = e.getSQLState();
        return isRowDataError(e)
                || state != null && (state.startsWith("21") || state.startsWith("27") || state.startsWith("0A"));
    }
}
