package io.onceflow.sink.postgres;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.api.Event;
import io.onceflow.sink.postgres.RecordingCommitRequest.Outcome;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.commit.PostgresCommittable;
import io.onceflow.sink.postgres.internal.schema.PostgresSchema;
import io.onceflow.sink.postgres.internal.writer.PostgresExactlyOnceWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.UUID;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The grants docs/operations.md gives the job's role, run as written (the test reads them from the page):
 * a DBA role creates the tables from {@code --print-postgres-ddl} and the effect function, grants exactly
 * that block to a second role, and that role starts an exactly-once sink and writes, prepares and commits
 * a checkpoint with a refused row and an effect call, as the job does.
 */
class LeastPrivilegeGrantsTest {
    private static final Path GUIDE = Path.of("docs", "operations.md");
    private static final Pattern GRANTS = Pattern.compile(
            "<!-- LeastPrivilegeGrantsTest runs the sql block below -->\\s*```sql\\n(.*?)```", Pattern.DOTALL);
    /** The role the page grants to. */
    private static final String DOCUMENTED_ROLE = "onceflow_job";
    private static final String EFFECT = "apply_payment";

    private final SinkDatabase db = new SinkDatabase();
    private final String suffix = UUID.randomUUID().toString().substring(0, 8);
    private final String owner = "onceflow_dba_" + suffix;
    private final String job = "onceflow_job_" + suffix;

    @Test
    void theDocumentedGrantsAreEnoughForAnExactlyOnceCheckpointWithARefusedRowAndAnEffect() throws Exception {
        createTablesAs(owner);
        for (String grant : documentedGrants()) {
            db.execute("SET ROLE " + owner + "; " + grant.replace(DOCUMENTED_ROLE, job) + "; RESET ROLE");
        }

        PostgresSinkConfig config = SinkDatabase.config(db.builderAs("grants", job).setEffectFunction(EFFECT));
        PostgresExactlyOnceWriter writer = db.freshWriter(config);
        PostgresCommittable committable = PostgresTwoPhaseCommitTest.checkpoint(writer, 1,
                SinkDatabase.event("a"), SinkDatabase.event("b"), refused("c"));
        List<RecordingCommitRequest> requests = PostgresTwoPhaseCommitTest.commit(config, committable);
        writer.close();

        assertThat(requests).extracting(request -> request.outcome).containsExactly(Outcome.COMMITTED);
        assertThat(db.deliveriesById()).containsOnlyKeys("a", "b");
        assertThat(db.rejects()).containsOnlyKeys("c");
        List<String> results = new ArrayList<>();
        db.query("SELECT result->>'status' FROM " + SinkDatabase.TABLE, row -> results.add(row.getString(1)));
        assertThat(results).containsExactly("applied", "applied");
    }

    /** The tables as a DBA creates them, owned by {@code role}; PUBLIC may not run the effect function. */
    private void createTablesAs(String role) throws Exception {
        db.execute("CREATE ROLE " + role + " NOLOGIN");
        db.execute("CREATE ROLE " + job + " LOGIN");
        db.execute("GRANT CREATE ON SCHEMA public TO " + role);
        String ddl = new PostgresSchema(PostgresTableOptions.DEFAULT_EVENTS, PostgresTableOptions.DEFAULT_REJECTS,
                PostgresTableOptions.DEFAULT_COMMIT_LOG, PostgresTableOptions.DEFAULT_RUNS,
                PostgresTableOptions.DEFAULT_WRITERS).ddl();
        db.execute("SET ROLE " + role + "; " + ddl
                + "ALTER TABLE " + SinkDatabase.TABLE + " ADD CONSTRAINT refuses CHECK (payload->>'refuse' IS NULL);"
                + "CREATE FUNCTION " + EFFECT + "(message_id text, payload jsonb) RETURNS jsonb LANGUAGE sql"
                + " AS $$ SELECT jsonb_build_object('status', 'applied') $$;"
                + "REVOKE ALL ON FUNCTION " + EFFECT + "(text, jsonb) FROM PUBLIC; RESET ROLE");
    }

    private static List<String> documentedGrants() throws IOException {
        Matcher block = GRANTS.matcher(Files.readString(GUIDE));
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

    private static Event refused(String id) {
        byte[] payload = ("{\"id\":\"" + id + "\",\"refuse\":true}").getBytes(StandardCharsets.UTF_8);
        return new Event(id, payload, "input", 0, 7, 0L, new HashMap<>());
    }
}
