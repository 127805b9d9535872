package io.onceflow.preflight;

import static io.onceflow.config.ConfigException.problem;

import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Arrays;
import java.util.Locale;
import java.util.Optional;
import java.util.Properties;
import java.util.regex.Pattern;
import javax.net.ssl.SSLException;
import org.postgresql.Driver;
import org.postgresql.PGProperty;
import org.postgresql.jdbc.SslMode;
import org.postgresql.util.GT;
import org.postgresql.util.PSQLException;

/**
 * The TLS part of the {@link PostgresPreflight}, as postgres.url asks for it (pgjdbc's {@code
 * sslmode}, or {@code ssl=true}, which means {@code verify-full}): a server without TLS and a
 * certificate that does not verify are each named, with the fix, instead of the driver's generic
 * failure; a session that should be encrypted but is not (TLS ended by a pooler or proxy on the way)
 * is a problem; a URL to a remote server that does not verify the server's certificate and name is
 * a warning ({@link #weakUrlWarning}).
 *
 * <p>pgjdbc's messages are translated into the JVM's language, so they are recognised by its own
 * translation ({@link GT}) of each message, never by English wording.
 */
final class PostgresTls {
    private static final String SUGGESTION = "sslmode=verify-full&sslrootcert=<the CA certificate, PEM>";

    private final Properties parsedUrl;
    private final String server;
    /** null when the URL's sslmode is invalid: the driver refuses it with its own message. */
    private final SslMode mode;

    PostgresTls(String url, String server) {
        this.parsedUrl = parse(url);
        this.server = server;
        this.mode = sslMode(parsedUrl);
    }

    /**
     * The warning to log for {@code url}, if any: a server that is not on this host (not loopback,
     * {@code localhost} or a Unix socket) reached without {@code sslmode=verify-full}, where an
     * attacker on the network path may read or impersonate it.
     *
     * @param url a PostgreSQL JDBC URL
     * @return one line naming postgres.url and the parameters to add, or empty
     */
    static Optional<String> weakUrlWarning(String url) {
        Properties parsed = parse(url);
        SslMode mode = sslMode(parsed);
        if (parsed.isEmpty() || mode == null || isLocal(parsed)) {
            return Optional.empty();
        }
        if (mode == SslMode.VERIFY_FULL) {
            return replacedVerification(parsed);
        }
        String given = PGProperty.SSL_MODE.getOrDefault(parsed) == null && PGProperty.SSL.getOrDefault(parsed) == null
                ? "has no sslmode (pgjdbc then uses prefer: no certificate check, and no TLS at all if the"
                        + " server or anything on the way does not offer it)"
                : "has sslmode=" + mode.value + switch (mode) {
                    case DISABLE -> " (no TLS)";
                    case ALLOW, PREFER -> " (no certificate check, and no TLS at all if the server or anything"
                            + " on the way does not offer it)";
                    case REQUIRE -> " (encrypted, but any certificate is accepted)";
                    default -> " (the certificate is checked, not that it names this host)";
                };
        return Optional.of(problem("postgres.url", "the URL of PostgreSQL at " + describe(parsed) + " " + given,
                "Add " + SUGGESTION + " to postgres.url, with that file on the JobManager and every TaskManager."));
    }

    /**
     * verify-full checks the certificate's chain and its name only with pgjdbc's own factory and host
     * name verifier: another {@code sslfactory} (e.g. NonValidatingFactory, which accepts any chain) or
     * {@code sslhostnameverifier} replaces those checks, whatever sslmode says.
     */
    private static Optional<String> replacedVerification(Properties parsed) {
        String factory = PGProperty.SSL_FACTORY.getOrDefault(parsed);
        String verifier = PGProperty.SSL_HOSTNAME_VERIFIER.getOrDefault(parsed);
        boolean ownFactory = factory == null || factory.equals("org.postgresql.ssl.LibPQFactory");
        if (ownFactory && verifier == null) {
            return Optional.empty();
        }
        String replaced = ownFactory ? "sslhostnameverifier=" + verifier : "sslfactory=" + factory;
        return Optional.of(problem("postgres.url", "the URL of PostgreSQL at " + describe(parsed)
                        + " has sslmode=verify-full, but " + replaced + " replaces the driver's check of the"
                        + " server's certificate or name",
                "Remove it and use " + SUGGESTION + "."));
    }

    /** What the driver's failure says about TLS, as one problem line; empty if it is not about TLS. */
    Optional<String> connectionProblem(SQLException e) {
        if (mode == null || !mode.requireEncryption() || !(e instanceof PSQLException)) {
            return Optional.empty();
        }
        String message = e.getMessage();
        String asked = "postgres.url asks for TLS (" + asked() + ")";
        if (isDriverMessage(message, "The server does not support SSL.")) {
            return Optional.of(problem("postgres.url", "PostgreSQL at " + server + " does not offer TLS, and " + asked,
                    "Turn TLS on at the server (ssl = on, ssl_cert_file and ssl_key_file in postgresql.conf) or"
                            + " connect to one that has it; do not lower sslmode."));
        }
        if (isDriverMessage(message, "The hostname {0} could not be verified by hostnameverifier {1}.")) {
            return Optional.of(problem("postgres.url", "the certificate of PostgreSQL at " + server
                            + " does not name the host the URL connects to, and " + asked,
                    "Connect by a name the certificate lists (its subject alternative names), or have it"
                            + " reissued with this name."));
        }
        if (isDriverMessage(message, "Could not open SSL root certificate file {0}.")
                || isDriverMessage(message, "Could not read SSL root certificate file {0}.")) {
            return Optional.of(problem("postgres.url", "cannot read " + rootCertificate() + ", and " + asked,
                    "Set sslrootcert to the PEM file of the CA that signed the server's certificate, present"
                            + " at that path on the JobManager and every TaskManager."));
        }
        if (hasCause(e, SSLException.class)) {
            return Optional.of(problem("postgres.url", "the certificate of PostgreSQL at " + server + " did not verify"
                            + " against " + rootCertificate() + " (" + rootCause(e).getMessage() + "), and " + asked,
                    "Set sslrootcert to the PEM file of the CA that signed the server's certificate."));
        }
        return Optional.empty();
    }

    /**
     * A problem if the URL asks for TLS but the server sees this session unencrypted: TLS ended
     * before the server (a pooler or proxy), and the rest of the way is plain text.
     */
    Optional<String> sessionProblem(Connection connection) throws SQLException {
        if (mode == null || !mode.requireEncryption()) {
            return Optional.empty();
        }
        try (Statement statement = connection.createStatement();
                ResultSet result = statement.executeQuery("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")) {
            if (result.next() && result.getBoolean(1)) {
                return Optional.empty();
            }
        }
        return Optional.of(problem("postgres.url", "postgres.url asks for TLS (" + asked() + ") but PostgreSQL at "
                        + server + " sees this session unencrypted (pg_stat_ssl): something on the way, a pooler or"
                        + " proxy, ends TLS and forwards plain text",
                "Connect to PostgreSQL directly, or have the pooler use TLS to the server too."));
    }

    private String asked() {
        return PGProperty.SSL_MODE.getOrDefault(parsedUrl) == null ? "ssl=true, i.e. sslmode=verify-full"
                : "sslmode=" + mode.value;
    }

    private String rootCertificate() {
        String path = PGProperty.SSL_ROOT_CERT.getOrDefault(parsedUrl);
        return path == null ? "the default sslrootcert ~/.postgresql/root.crt (none set)" : "sslrootcert=" + path;
    }

    /** The URL's parameters as the driver reads them; empty if it is not a PostgreSQL URL. */
    private static Properties parse(String url) {
        Properties parsed = Driver.parseURL(url, null);
        return parsed == null ? new Properties() : parsed;
    }

    private static SslMode sslMode(Properties parsed) {
        try {
            return SslMode.of(parsed);
        } catch (PSQLException e) {
            return null;
        }
    }

    private static String describe(Properties parsed) {
        return PGProperty.PG_HOST.getOrDefault(parsed) + ":" + PGProperty.PG_PORT.getOrDefault(parsed) + "/"
                + PGProperty.PG_DBNAME.getOrDefault(parsed);
    }

    /** Every host of the URL is this machine: loopback, {@code localhost}, or a Unix socket. */
    private static boolean isLocal(Properties parsed) {
        String socketFactory = PGProperty.SOCKET_FACTORY.getOrDefault(parsed);
        if (socketFactory != null && socketFactory.toUpperCase(Locale.ROOT).contains("UNIX")) {
            return true;
        }
        return Arrays.stream(PGProperty.PG_HOST.getOrDefault(parsed).split(","))
                .map(host -> host.strip().replaceAll("^\\[|]$", ""))
                .allMatch(Preflight::isLoopbackHost);
    }

    /** Whether {@code message} is the driver's {@code pattern}, as it translates it, with any arguments. */
    private static boolean isDriverMessage(String message, String pattern) {
        Object[] markers = new Object[2];
        Arrays.setAll(markers, i -> "\u0000" + i + "\u0000");
        String regex = Pattern.quote(GT.tr(pattern, markers)).replaceAll("\u0000\\d\u0000", "\\\\E.*\\\\Q");
        return message != null && Pattern.compile(regex, Pattern.DOTALL).matcher(message).matches();
    }

    private static boolean hasCause(Throwable e, Class<? extends Throwable> type) {
        for (Throwable cause = e; cause != null; cause = cause.getCause()) {
            if (type.isInstance(cause)) {
                return true;
            }
        }
        return false;
    }

    private static Throwable rootCause(Throwable e) {
        Throwable root = e;
        while (root.getCause() != null) {
            root = root.getCause();
        }
        return root;
    }
}
