package io.onceflow.tools.audit;

import io.onceflow.config.PostgresSettings;
import io.onceflow.sink.postgres.internal.EffectFunction;
import io.onceflow.sink.postgres.internal.PostgresConnections;
import io.onceflow.sink.postgres.internal.TransactionId;
import io.onceflow.sink.postgres.internal.EventsTable;
import io.onceflow.sink.postgres.internal.RejectsTable;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

/**
 * The PostgreSQL part of an {@link Audit}: one row per id with output (none for an id the processor
 * dead-lettered or filtered), and no prepared transaction of this job's sink prefix left behind. An
 * id that the database refused is accounted for by its row in the rejects table (reported, not a
 * problem). The rows whose {@code deliveries} count more than one write are handed back for the
 * audit to weigh against the input. A live audit leaves alone the rows of no audited id written
 * from records after its bound, and takes the job's prepared transactions for what it has in flight.
 *
 * <p>With an effect function configured ({@code postgres.effect.function}), every row written with it
 * must have a result: the effects applied, rejected and failed are counted (the last two are
 * outcomes, not problems), and a row whose effect is still pending (no result, a transaction that
 * calls it) is a problem once the job has drained. Rows written before the effect was configured
 * have neither and are not.
 */
final class PostgresTableAudit {
    /** Rows are streamed, not loaded at once: an audit of millions of rows fits in the audit's memory. */
    private static final int FETCH_SIZE = 10_000;
    /** A fetch of {@link #FETCH_SIZE} rows that takes longer is a server gone away, not a slow scan. */
    private static final Duration ROUND_TRIP_TIMEOUT = Duration.ofMinutes(10);
    private static final Duration CONNECT_TIMEOUT = Duration.ofSeconds(10);

    private final PostgresSettings settings;
    /** The statements of the two tables; their names were validated as identifiers by the configuration. */
    private final EventsTable events;
    private final RejectsTable rejectsTable;

    PostgresTableAudit(PostgresSettings settings) {
        this.settings = settings;
        this.events = new EventsTable(settings.table());
        this.rejectsTable = new RejectsTable(settings.rejectsTable());
    }

    /**
     * One consistent, read-only snapshot for all three reads, however long the scan takes: role or
     * database defaults (a statement or transaction timeout, idle timeouts) are not the audit's.
     */
    private static void pinSessionSettings(Connection connection) throws SQLException {
        try (Statement statement = connection.createStatement()) {
            statement.execute("SET statement_timeout = 0; SET lock_timeout = 0;"
                    + " SET idle_in_transaction_session_timeout = 0;"
                    + " SELECT set_config('transaction_timeout', '0', false)"
                    + " WHERE current_setting('server_version_num')::int >= 170000;"
                    + " SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY");
        }
    }

    /**
     * @param expectedIds the ids that must have a row: every accepted id of the input with an output
     * @param deadLetteredIds the ids the processor dead-lettered or filtered: a row of theirs is a second outcome
     * @return the deliveries of each expected id whose row (or refused row) counts more than one
     */
    Map<String, Integer> audit(Set<String> expectedIds, Set<String> deadLetteredIds, AuditReport report) {
        Map<String, Integer> redelivered = new HashMap<>();
        report.postgresAudited = true;
        try (Connection connection = PostgresConnections.connect(settings.connection(), "onceflow-audit",
                ROUND_TRIP_TIMEOUT, CONNECT_TIMEOUT)) {
            pinSessionSettings(connection);
            connection.setAutoCommit(false); // a cursor, so the driver honours the fetch size
            Set<String> seen = new HashSet<>(expectedIds.size() * 2);
            boolean effectConfigured = settings.effectFunction().isPresent();
            // a table from before effects has no result column: as if no row had a result
            String scanEvents = events.auditStatement(hasResultColumn(connection));
            try (Statement statement = connection.createStatement()) {
                statement.setFetchSize(FETCH_SIZE);
                try (ResultSet rows = statement.executeQuery(scanEvents)) {
                    while (rows.next()) {
                        String id = rows.getString(1);
                        if (inFlight(id, rows, 6, expectedIds, deadLetteredIds, report)) {
                            continue;
                        }
                        int deliveries = rows.getInt(2);
                        countEffect(report, id, rows.getBoolean(3), rows.getString(4),
                                effectConfigured && rows.getBoolean(5));
                        report.postgresRows++;
                        report.maxDeliveries = Math.max(report.maxDeliveries, deliveries);
                        unexpected(id, expectedIds, deadLetteredIds, report.postgresUnexpectedIds, report);
                        if (deliveries > 1 && expectedIds.contains(id)) {
                            redelivered.put(id, deliveries);
                        }
                        seen.add(id);
                    }
                }
                try (ResultSet rejects = statement.executeQuery(rejectsTable.auditStatement())) {
                    while (rejects.next()) {
                        String id = rejects.getString(1);
                        if (inFlight(id, rejects, 4, expectedIds, deadLetteredIds, report)) {
                            continue;
                        }
                        int deliveries = rejects.getInt(3);
                        report.postgresRejectedIds.add(id);
                        report.postgresRejectsBySqlState.merge(rejects.getString(2), 1L, Long::sum);
                        // a refused row counts its deliveries as a row does, and is weighed the same way
                        report.maxDeliveries = Math.max(report.maxDeliveries, deliveries);
                        if (deliveries > 1 && expectedIds.contains(id)) {
                            redelivered.put(id, deliveries);
                        }
                        unexpected(id, expectedIds, deadLetteredIds, report.postgresUnexpectedRejects, report);
                        seen.add(id);
                    }
                }
                try (ResultSet prepared = statement.executeQuery(
                        "SELECT gid FROM pg_prepared_xacts WHERE database = current_database()")) {
                    while (prepared.next()) {
                        String gid = prepared.getString(1);
                        if (TransactionId.parse(gid, settings.sinkPrefix()).isPresent()) {
                            report.preparedTransactionsLeft.add(gid);
                        }
                    }
                }
            }
            connection.rollback();
            report.effectsAudited = effectConfigured || report.effectsApplied + report.effectsRejected.count
                    + report.effectsFailed.count + report.effectsSkipped.count > 0;
            for (String id : expectedIds) {
                if (!seen.contains(id)) {
                    report.postgresMissingIds.add(id);
                }
            }
            return redelivered;
        } catch (SQLException e) {
            throw new IllegalStateException("could not audit PostgreSQL table " + settings.table() + ": " + e.getMessage(), e);
        }
    }

    /**
     * Whether a row is one a live audit leaves alone: of no id it knows, written from a record after
     * its bound. Counted as in flight.
     *
     * @param sourceColumn the column of the row's source topic; partition and offset follow it
     */
    private static boolean inFlight(String id, ResultSet row, int sourceColumn, Set<String> expectedIds,
            Set<String> deadLetteredIds, AuditReport report) throws SQLException {
        if (expectedIds.contains(id) || deadLetteredIds.contains(id)
                || report.scope.covers(row.getString(sourceColumn), row.getInt(sourceColumn + 1),
                        row.getLong(sourceColumn + 2))) {
            return false;
        }
        report.inFlightRows++;
        return true;
    }

    /** Reports a row of an id that should have none: dead-lettered by the processor, or no input id at all. */
    private static void unexpected(String id, Set<String> expectedIds, Set<String> deadLetteredIds,
            Finding unexpected, AuditReport report) {
        if (deadLetteredIds.contains(id)) {
            report.postgresDeadLetteredIds.add(id);
        } else if (!expectedIds.contains(id)) {
            unexpected.add(id);
        }
    }

    /** @param awaitsEffect an effect is configured and the row's transaction calls it (it is not from before) */
    private static void countEffect(AuditReport report, String id, boolean noResult, String status,
            boolean awaitsEffect) {
        if (!noResult && report.resultsTopic != null && !EffectFunction.SKIPPED.equals(status)) {
            report.decidedStatuses.put(id, EffectFunction.REJECTED.equals(status) || EffectFunction.FAILED.equals(status)
                    ? status : "applied");
        }
        if (noResult) {
            if (awaitsEffect) {
                report.effectsMissing.add(id);
            }
        } else if (EffectFunction.REJECTED.equals(status)) {
            report.effectsRejected.add(id);
        } else if (EffectFunction.FAILED.equals(status)) {
            report.effectsFailed.add(id);
        } else if (EffectFunction.SKIPPED.equals(status)) {
            report.effectsSkipped.add(id);
        } else {
            report.effectsApplied++;
        }
    }

    private boolean hasResultColumn(Connection connection) throws SQLException {
        try (PreparedStatement query = connection.prepareStatement(events.hasResultColumnStatement())) {
            query.setString(1, events.name());
            try (ResultSet exists = query.executeQuery()) {
                exists.next();
                return exists.getBoolean(1);
            }
        }
    }
}
