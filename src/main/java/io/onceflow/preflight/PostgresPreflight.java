package io.onceflow.preflight;

import static io.onceflow.config.ConfigException.problem;

import io.onceflow.config.PostgresSettings;
import io.onceflow.sink.postgres.internal.EffectFunction;
import io.onceflow.sink.postgres.internal.PostgresConnections;
import io.onceflow.sink.postgres.internal.TransactionPoolerCheck;
import io.onceflow.sink.postgres.internal.EventsTable;
import io.onceflow.sink.postgres.internal.PendingEffectsTable;
import io.onceflow.sink.postgres.internal.ServerChecks;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.Properties;
import org.postgresql.Driver;
import org.postgresql.PGProperty;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The PostgreSQL part of the {@link Preflight}: the server accepts the login, and the user may
 * write the tables that exist and create those that do not, and call the effect function, and the
 * connection is not pooled per transaction (the job), or read the event table (the audit). It refuses
 * a server that streams to asynchronous replicas ({@link ServerChecks#replicationRisk}) unless
 * {@code postgres.accept.commit.loss.on.failover=true}, and then warns. What
 * postgres.url asks of TLS is {@link PostgresTls}'s.
 */
final class PostgresPreflight {
    private static final Logger LOG = LoggerFactory.getLogger(PostgresPreflight.class);
    /** Upserted (the events, the rejects, the writers' claims: INSERT ... ON CONFLICT DO UPDATE). */
    private static final List<String> UPSERT_PRIVILEGES = List.of("SELECT", "INSERT", "UPDATE");
    /** Appended to and read (the commit log, the runs). */
    private static final List<String> APPEND_PRIVILEGES = List.of("SELECT", "INSERT");
    private static final List<String> QUEUE_PRIVILEGES = List.of("SELECT", "INSERT", "UPDATE", "DELETE");
    /** Appended to by the effects, marked and trimmed by the results relay. */
    private static final List<String> OUTBOX_PRIVILEGES = List.of("SELECT", "INSERT", "UPDATE", "DELETE");

    private final PostgresSettings settings;
    private final Preflight.Purpose purpose;
    private final String server;
    private final PostgresTls tls;
    private final List<String> problems = new ArrayList<>();

    PostgresPreflight(PostgresSettings settings, Preflight.Purpose purpose) {
        this.settings = settings;
        this.purpose = purpose;
        this.server = describeServer(settings.url());
        this.tls = new PostgresTls(settings.url(), server);
    }

    List<String> problems() {
        long started = System.nanoTime();
        // a warning, not a problem: a URL without verify-full may be what a private network accepts
        PostgresTls.weakUrlWarning(settings.url()).ifPresent(LOG::warn);
        try (Connection connection = connect()) {
            tls.sessionProblem(connection).ifPresent(problems::add);
            if (purpose == Preflight.Purpose.RUN_JOB) {
                // every table the sink writes: a privilege missing on any of them (the rejects table is
                // written only when a row is refused) would otherwise fail the job in a restart loop later
                checkTable(connection, "postgres.table", settings.table(), UPSERT_PRIVILEGES);
                checkTable(connection, "postgres.rejects.table", settings.rejectsTable(), UPSERT_PRIVILEGES);
                checkTable(connection, "postgres.commit.log.table", settings.commitLogTable(), APPEND_PRIVILEGES);
                checkTable(connection, "postgres.runs.table", settings.runsTable(), APPEND_PRIVILEGES);
                checkTable(connection, "postgres.writers.table", settings.writersTable(), UPSERT_PRIVILEGES);
                // the effect queue, named after the events table: filled by the writers, emptied by the workers
                PendingEffectsTable queue = new PendingEffectsTable(settings.table());
                checkTable(connection, "postgres.table", queue.name(), QUEUE_PRIVILEGES);
                // the effect log, written by the effects command run with the job's settings
                checkTable(connection, "postgres.table", queue.log().name(), APPEND_PRIVILEGES);
                if (settings.effectResultsTopic().isPresent()) {
                    checkTable(connection, "postgres.effect.results.topic",
                            new EventsTable(settings.table()).outcomes().name(), OUTBOX_PRIVILEGES);
                }
                if (settings.effectFunction().isPresent()) {
                    EffectFunction.problem(connection, settings.effectFunction().get())
                            .ifPresent(problem -> problems.add("postgres.effect.function: at " + server + ", " + problem));
                }
                checkReplication(connection);
                String keys = settings.tables().effectKeys();
                if (keys != null) {
                    EffectFunction.keysProblem(connection, keys)
                            .ifPresent(problem -> problems.add("postgres.effect.keys: at " + server + ", " + problem));
                }
                try {
                    // --check should say it too, not only the run start that follows
                    TransactionPoolerCheck.requireOwnSession(connection, this::connect,
                            TransactionPoolerCheck.RUN_START_PROBES);
                } catch (IllegalStateException e) {
                    problems.add("postgres.url: at " + server + ", " + e.getMessage());
                }
            } else {
                checkTable(connection, "postgres.table", settings.table(), List.of("SELECT"));
            }
        } catch (SQLException e) {
            problems.add(connectionProblem(e, " after " + Preflight.secondsSince(started)));
        }
        return problems;
    }

    /**
     * Replicas that a failover could promote while behind are refused, unless {@code
     * postgres.accept.commit.loss.on.failover=true} accepts the risk: then a warning.
     */
    private void checkReplication(Connection connection) throws SQLException {
        Optional<ServerChecks.ReplicationRisk> risk = ServerChecks.replicationRisk(connection);
        if (risk.isPresent() && settings.acceptCommitLossOnFailover()) {
            LOG.warn("{} ({}; accepted: postgres.accept.commit.loss.on.failover=true)", risk.get().warning(), server);
        }
        replicationProblem(risk, server, settings.acceptCommitLossOnFailover()).ifPresent(problems::add);
    }

    /**
     * The refusal of a server with replicas that a failover could promote while behind.
     *
     * @param risk what {@link ServerChecks#replicationRisk} found
     * @param accepted whether {@code postgres.accept.commit.loss.on.failover=true}
     * @return one line naming the replicas, the fix and the opt-in; empty if nothing is at risk or the risk accepted
     */
    static Optional<String> replicationProblem(Optional<ServerChecks.ReplicationRisk> risk, String server,
            boolean accepted) {
        if (risk.isEmpty() || accepted) {
            return Optional.empty();
        }
        return Optional.of(problem("postgres.url", "at " + server + ", " + risk.get().found()
                        + ": a failover to one that is behind can lose acknowledged commits and prepared transactions"
                        + " of completed checkpoints",
                risk.get().fix() + " Or, to accept that loss, set postgres.accept.commit.loss.on.failover=true"
                        + " (docs/failover.md)."));
    }

    private Connection connect() throws SQLException {
        return PostgresConnections.connect(settings.connection(), "onceflow-preflight", Preflight.SERVICE_TIMEOUT,
                Preflight.SERVICE_TIMEOUT.dividedBy(2));
    }

    /** The server as {@code host:port/database}. */
    String server() {
        return server;
    }

    /**
     * One line for a failure to connect or log in, naming the key to check.
     *
     * @param after when the attempt failed, e.g. {@code " after 1.2 s"}; empty if not measured
     */
    String connectionProblem(SQLException e, String after) {
        Optional<String> tlsProblem = tls.connectionProblem(e);
        if (tlsProblem.isPresent()) {
            return tlsProblem.get();
        }
        String state = e.getSQLState() == null ? "" : e.getSQLState();
        String message = e.getMessage();
        if (state.startsWith("28")) {
            return problem("postgres.password",
                    "PostgreSQL at " + server + " refused the login of user '" + settings.user() + "' (" + message + ")",
                    "Check postgres.user and postgres.password, and that pg_hba.conf admits this host.");
        }
        if (state.equals("3D000")) {
            return problem("postgres.url", "PostgreSQL at " + server + " answered: " + message,
                    "Create the database, or name an existing one in the URL.");
        }
        return problem("postgres.url", "cannot connect to PostgreSQL at " + server + after + " (" + message + ")",
                "Check the host, port and database in the URL, that PostgreSQL runs and listens on that address"
                        + " (listen_addresses), and that it is reachable from where the job's main method runs.");
    }

    /**
     * An existing table needs each privilege; a missing one (the job creates it) needs CREATE on its
     * schema. {@code has_table_privilege} with several privileges is true if any is held, so each is
     * asked alone.
     */
    private void checkTable(Connection connection, String key, String table, List<String> privileges)
            throws SQLException {
        if (exists(connection, table)) {
            for (String privilege : privileges) {
                if (!isTrue(connection, "SELECT has_table_privilege(?, '" + privilege + "')", table)) {
                    problems.add(problem(key,
                            "user '" + settings.user() + "' may not " + privilege + " on " + table + " at " + server,
                            "GRANT " + String.join(", ", privileges) + " ON " + table + " TO " + settings.user() + "."));
                    return;
                }
            }
        } else if (purpose == Preflight.Purpose.AUDIT) {
            problems.add(problem(key, "the table " + table + " does not exist at " + server,
                    "Audit the database the job writes to, or fix the table name."));
        } else {
            String schema = table.contains(".") ? table.substring(0, table.indexOf('.')) : currentSchema(connection);
            if (schema == null || !isTrue(connection, "SELECT has_schema_privilege(?, 'CREATE')", schema)) {
                problems.add(problem(key,
                        "the table " + table + " does not exist at " + server + " and user '" + settings.user()
                                + "' may not create it" + (schema == null ? " (no schema in its search_path)" : " in schema " + schema),
                        "Create the tables as a DBA (--print-postgres-ddl prints the statements) and grant "
                                + String.join(", ", privileges) + " on them, or GRANT CREATE ON SCHEMA "
                                + (schema == null ? "<schema>" : schema) + " TO " + settings.user() + "."));
            }
        }
    }

    private static boolean exists(Connection connection, String table) throws SQLException {
        return isTrue(connection, "SELECT to_regclass(?) IS NOT NULL", table);
    }

    private static String currentSchema(Connection connection) throws SQLException {
        try (PreparedStatement query = connection.prepareStatement("SELECT current_schema()");
                ResultSet result = query.executeQuery()) {
            result.next();
            return result.getString(1);
        }
    }

    private static boolean isTrue(Connection connection, String sql, String parameter) throws SQLException {
        try (PreparedStatement query = connection.prepareStatement(sql)) {
            query.setString(1, parameter);
            try (ResultSet result = query.executeQuery()) {
                result.next();
                return result.getBoolean(1);
            }
        }
    }

    /** {@code host:port/database} from the URL, which holds no secret (the configuration refuses one). */
    private static String describeServer(String url) {
        Properties parsed = Driver.parseURL(url, null);
        if (parsed == null) {
            return url;
        }
        return PGProperty.PG_HOST.getOrDefault(parsed) + ":" + PGProperty.PG_PORT.getOrDefault(parsed) + "/"
                + PGProperty.PG_DBNAME.getOrDefault(parsed);
    }
}
