package io.onceflow.testing;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.sink.postgres.options.PostgresTableOptions;
import io.onceflow.sink.postgres.internal.PostgresSchema;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A database as a DBA sets it up for the job from docs/deploy.md: a role that owns the tables of
 * {@code --print-postgres-ddl} (default names, a CHECK constraint that refuses payloads with a
 * {@code refuse} member) and the effect function {@link #EFFECT} (not executable by PUBLIC), and the
 * job's login role given exactly the GRANT block of the page, read from it.
 */
public final class DocumentedGrants {
    /** The effect function the block grants EXECUTE on: returns {"status": "applied"}, touches nothing. */
    public static final String EFFECT = "apply_payment";
    private static final Path GUIDE = Path.of("docs", "deploy.md");
    private static final String MARKER =
            "<!-- DocumentedGrants (LeastPrivilegeGrantsTest, PostgresPreflightGrantsTest) runs the sql block below -->";
    private static final Pattern BLOCK = Pattern.compile(Pattern.quote(MARKER) + "\\s*```sql\\n(.*?)```", Pattern.DOTALL);
    /** The role the page grants to. */
    private static final String DOCUMENTED_ROLE = "onceflow_job";

    private DocumentedGrants() {}

    /**
     * Creates the owner and the job's role (unique names: roles are server-wide), the tables and the
     * function as the owner, and runs the page's GRANT block for the job's role.
     *
     * @return the job's role, which logs in without a password (the embedded server trusts local logins)
     */
    public static String apply(TestPostgres.TestDatabase database) throws SQLException, IOException {
        String suffix = UUID.randomUUID().toString().substring(0, 8);
        String owner = "onceflow_dba_" + suffix;
        String job = DOCUMENTED_ROLE + "_" + suffix;
        database.execute("CREATE ROLE " + owner + " NOLOGIN", "CREATE ROLE " + job + " LOGIN",
                "GRANT CREATE ON SCHEMA public TO " + owner);
        String ddl = new PostgresSchema(PostgresTableOptions.DEFAULT_EVENTS, PostgresTableOptions.DEFAULT_REJECTS,
                PostgresTableOptions.DEFAULT_COMMIT_LOG, PostgresTableOptions.DEFAULT_RUNS,
                PostgresTableOptions.DEFAULT_WRITERS).ddl();
        database.execute("SET ROLE " + owner + "; " + ddl
                + "ALTER TABLE " + PostgresTableOptions.DEFAULT_EVENTS
                + " ADD CONSTRAINT refuses CHECK (payload->>'refuse' IS NULL);"
                + "CREATE FUNCTION " + EFFECT + "(message_id text, payload jsonb) RETURNS jsonb LANGUAGE sql"
                + " AS $$ SELECT jsonb_build_object('status', 'applied') $$;"
                + "REVOKE ALL ON FUNCTION " + EFFECT + "(text, jsonb) FROM PUBLIC; RESET ROLE");
        for (String grant : statements()) {
            database.execute("SET ROLE " + owner + "; " + grant.replace(DOCUMENTED_ROLE, job) + "; RESET ROLE");
        }
        return job;
    }

    /** The GRANT statements of the page's block, comments left out. */
    public static List<String> statements() throws IOException {
        Matcher block = BLOCK.matcher(Files.readString(GUIDE));
        assertThat(block.find()).as("the grants block of " + GUIDE).isTrue();
        List<String> statements = new ArrayList<>();
        for (String statement : block.group(1).replaceAll("(?m)^\\s*--.*$", "").split(";")) {
            if (!statement.isBlank()) {
                statements.add(statement.strip().replaceAll("\\s+", " "));
            }
        }
        assertThat(statements).as("GRANT statements to " + DOCUMENTED_ROLE).isNotEmpty()
                .allSatisfy(statement -> assertThat(statement).startsWith("GRANT ").endsWith(" TO " + DOCUMENTED_ROLE));
        return statements;
    }
}
