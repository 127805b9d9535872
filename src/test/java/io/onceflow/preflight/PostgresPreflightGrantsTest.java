package io.onceflow.preflight;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.config.OnceflowConfig;
import io.onceflow.testing.DocumentedGrants;
import io.onceflow.testing.TestPostgres;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The checks before a start ask for exactly the privileges docs/deploy.md grants the job's role
 * ({@link DocumentedGrants}): none is missing with the block as written, and each table privilege and the
 * function's EXECUTE, revoked alone, is reported in one line that names it and the GRANT to run.
 */
class PostgresPreflightGrantsTest {
    /** GRANT p1, p2 ON t1, t2 TO role, or GRANT EXECUTE ON FUNCTION f(args) TO role. */
    private static final Pattern TABLE_GRANT = Pattern.compile("GRANT (.+) ON (?!SCHEMA )(?!FUNCTION )(.+) TO \\S+");
    private static final Pattern FUNCTION_GRANT = Pattern.compile("GRANT EXECUTE ON FUNCTION (.+) TO \\S+");

    private final TestPostgres.TestDatabase database = TestPostgres.shared().newDatabase();
    private String job;

    @BeforeEach
    void grantAsDocumented() throws Exception {
        job = DocumentedGrants.apply(database);
    }

    private List<String> problems() {
        Map<String, String> settings = new HashMap<>(Map.of("kafka.bootstrap.servers", "kafka:9092", "input.topics", "in",
                "input.group.id", "g", "output.topic", "out", "dead.letter.topic", "dlq",
                "kafka.transactional.id.prefix", "p", "postgres.sink.prefix", "grants",
                // the test database's URL names its user, which would override postgres.user
                "postgres.url", database.jdbcUrl().replaceFirst("\\?.*$", ""), "postgres.user", job,
                "postgres.effect.function", DocumentedGrants.EFFECT));
        settings.put("postgres.password", "");
        settings.put("postgres.effect.results.topic", "results"); // the outbox's grant is documented too
        return new PostgresPreflight(OnceflowConfig.fromMap(settings, Map.of()).postgres().orElseThrow(),
                Preflight.Purpose.RUN_JOB).problems();
    }

    @Test
    void theDocumentedGrantsPassAndEachRevokedOneIsReported() throws Exception {
        assertThat(problems()).as("with the documented grants").isEmpty();

        List<String> unreported = new ArrayList<>();
        int revoked = 0;
        for (String grant : DocumentedGrants.statements()) {
            Matcher table = TABLE_GRANT.matcher(grant);
            Matcher function = FUNCTION_GRANT.matcher(grant);
            List<String> revocations = new ArrayList<>();
            if (function.matches()) {
                revocations.add("EXECUTE ON FUNCTION " + function.group(1));
            } else if (table.matches()) {
                // USAGE ON SCHEMA is left alone: without it no table is found, which the checks report too
                for (String privilege : table.group(1).split(",\\s*")) {
                    for (String name : table.group(2).split(",\\s*")) {
                        revocations.add(privilege + " ON " + name);
                    }
                }
            }
            for (String revocation : revocations) {
                database.execute("REVOKE " + revocation + " FROM " + job);
                List<String> problems = problems();
                database.execute("GRANT " + revocation + " TO " + job);
                revoked++;
                if (problems.isEmpty()) {
                    unreported.add(revocation);
                    continue;
                }
                // one line, naming what was revoked and the GRANT that gives it back
                String privilege = revocation.substring(0, revocation.indexOf(" ON "));
                String object = revocation.substring(revocation.indexOf(" ON ") + 4).replaceFirst("^FUNCTION ", "")
                        .replaceFirst("\\(.*$", "");
                assertThat(problems).as("without %s", revocation).singleElement().asString()
                        .doesNotContain("\n").contains(privilege).contains(object).contains(" TO " + job);
            }
        }

        assertThat(revoked).as("table privileges and EXECUTE revoked one at a time").isPositive();
        assertThat(unreported).as("revoked privileges the checks did not report").isEmpty();
    }
}
