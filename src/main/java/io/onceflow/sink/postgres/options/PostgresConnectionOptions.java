package io.onceflow.sink.postgres.options;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;

/**
 * Where the PostgreSQL sink connects, and as whom. The password never appears in
 * {@link #toString()} or in a problem message.
 *
 * @param jdbcUrl {@code jdbc:postgresql://host:port/database}, without a password in it
 * @param user the database user
 * @param password the password; empty for none
 */
public record PostgresConnectionOptions(String jdbcUrl, String user, String password) implements Serializable {
    /** What every PostgreSQL JDBC URL starts with. */
    public static final String URL_PREFIX = "jdbc:postgresql:";

    public PostgresConnectionOptions {
        password = Objects.requireNonNullElse(password, "");
    }

    /** Every problem with these options, each saying what to do; empty when they are valid. */
    public List<String> problems() {
        List<String> problems = new ArrayList<>();
        if (jdbcUrl == null || !jdbcUrl.startsWith(URL_PREFIX)) {
            problems.add("JDBC URL '" + jdbcUrl + "' is not a PostgreSQL URL: use jdbc:postgresql://host:port/database");
        } else if (jdbcUrl.toLowerCase(Locale.ROOT).contains("password=")) {
            // Not echoed: it holds the secret.
            problems.add("the JDBC URL contains a password: remove it from the URL and use setPassword, since URLs"
                    + " appear in logs and in the Flink web UI");
        }
        if (user == null || user.isBlank()) {
            problems.add("user is not set: set the database user with setUser");
        }
        return problems;
    }

    /** The URL and user, never the password. */
    @Override
    public String toString() {
        return "jdbcUrl=" + jdbcUrl + ", user=" + user;
    }
}
