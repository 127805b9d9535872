package io.onceflow.testing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Path;
import java.sql.Connection;
import java.sql.Statement;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The one PostgreSQL fixture keeps what each of its users relies on: settings, URLs, restart. */
class TestPostgresTest {
    @TempDir
    Path directory;

    @Test
    void anOwnServerAllowsPreparedTransactionsAndKeepsThemAcrossARestart() throws Exception {
        try (TestPostgres server = TestPostgres.start(directory.resolve("postgres"))) {
            assertThat(server.jdbcUrl()).as("the cluster job's postgres.url: no user in it")
                    .matches("jdbc:postgresql://127\\.0\\.0\\.1:\\d+/postgres");
            assertThat(server.rows("SHOW max_prepared_transactions"))
                    .containsExactly(String.valueOf(TestPostgres.MAX_PREPARED_TRANSACTIONS));
            assertThat(server.rows("SHOW fsync")).as("zonky's default, not the durable property's").containsExactly("off");
            server.execute("CREATE TABLE kept (x int)");
            try (Connection connection = server.connect(); Statement statement = connection.createStatement()) {
                connection.setAutoCommit(false);
                statement.execute("INSERT INTO kept VALUES (1)");
                statement.execute("PREPARE TRANSACTION 'kept-1'");
            }

            server.restart();

            assertThat(server.rows("SELECT gid FROM pg_prepared_xacts")).containsExactly("kept-1");
            server.execute("COMMIT PREPARED 'kept-1'");
            assertThat(server.rows("SELECT x FROM kept")).containsExactly("1");
        }
    }

    @Test
    void theSharedServerAllowsPreparedTransactionsAndGivesEachTestItsOwnDatabase() throws Exception {
        TestPostgres shared = TestPostgres.shared();
        assumeTrue(shared.canRestart(), "the embedded server's settings; an external one has its own");
        assertThat(shared.rows("SHOW max_prepared_transactions"))
                .containsExactly(String.valueOf(TestPostgres.MAX_PREPARED_TRANSACTIONS));
        assertThat(shared.rows("SHOW fsync")).containsExactly(Boolean.getBoolean(TestPostgres.DURABLE_PROPERTY) ? "on" : "off");
        TestPostgres.TestDatabase one = shared.newDatabase();
        TestPostgres.TestDatabase other = shared.newDatabase();
        one.execute("CREATE TABLE only_here (x int)", "INSERT INTO only_here VALUES (7)");
        assertThat(one.rows("SELECT x FROM only_here")).containsExactly("7");
        assertThat(other.rows("SELECT count(*) FROM pg_tables WHERE tablename = 'only_here'")).containsExactly("0");
    }
}
