package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.options.PostgresTableOptions;
import static io.onceflow.sink.postgres.PostgresTwoPhaseCommitTest.checkpoint;
import static io.onceflow.sink.postgres.PostgresTwoPhaseCommitTest.commit;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresCommittable;
import io.onceflow.sink.postgres.internal.PostgresExactlyOnceWriter;
import io.onceflow.testing.TestPostgres;
import java.io.IOException;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Collections;
import java.util.Map;
import java.util.OptionalLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What the PostgreSQL sink does after its database is restored from a backup, and that the
 * procedure of docs/backup-restore.md resumes it: on servers of the test's own, stopped and copied
 * at file level (what a physical backup or a point-in-time recovery restores) and, for a logical
 * dump, copied row by row into a newly initialised server (what pg_restore does: the same rows, a
 * younger transaction-id counter, no prepared transactions).
 */
class BackupRestoreTest {
    private static final String PREFIX = "job";
    private int attempts;

    @TempDir
    Path directory;

    @Test
    void aRestoreBehindTheCheckpointReportsLostAndAFreshStartReplayingFromBeforeTheBackupMakesItWhole()
            throws Exception {
        Path live = directory.resolve("live");
        Path backup = directory.resolve("backup");
        PostgresCommittable afterBackup;
        try (TestPostgres server = TestPostgres.start(live)) {
            PostgresSinkConfig config = SinkDatabase.config(builder(server));
            try (PostgresExactlyOnceWriter writer = writer(config, OptionalLong.empty())) {
                commit(config, checkpoint(writer, 1, "a", "b"));
            }
        }
        TestPostgres.copyDataDirectory(live, backup); // the backup: taken after checkpoint 1
        try (TestPostgres server = TestPostgres.start(live)) {
            PostgresSinkConfig config = SinkDatabase.config(builder(server));
            try (PostgresExactlyOnceWriter writer = writer(config, OptionalLong.of(1))) {
                afterBackup = checkpoint(writer, 2, "c");
                commit(config, afterBackup);
            }
        }

        try (TestPostgres restored = TestPostgres.start(backup)) {
            PostgresSinkConfig config = SinkDatabase.config(builder(restored));
            // what the job does from its latest checkpoint (2): reports the loss, and runs on without the rows
            assertThat(commit(config, afterBackup).get(0).failure)
                    .hasMessageContaining("LOST: prepared transaction " + afterBackup.transactionId())
                    .hasMessageContaining("after a database restore, follow docs/backup-restore.md");

            // the runbook: a fresh start discarding what is pending, the input replayed from before the backup
            PostgresSinkConfig fresh = SinkDatabase.newRun(config);
            try (PostgresExactlyOnceWriter writer = writer(fresh, OptionalLong.empty())) {
                commit(fresh, checkpoint(writer, 1, "a", "b", "c"));
            }
            assertThat(SinkDatabase.deliveries(restored)).as("every id once; the replayed ones counted as redelivered")
                    .isEqualTo(Map.of("a", 2, "b", 2, "c", 1));
        }
    }

    @Test
    void aLogicalRestoreRefusesEveryStartNamingTheRunbookUntilTheRunsOfTheOldServerAreCleared() throws Exception {
        try (TestPostgres old = TestPostgres.start(directory.resolve("old"))) {
            // an older server has issued more transaction ids than a newly initialised one
            old.execute("DO $$ BEGIN FOR i IN 1..1000 LOOP PERFORM pg_current_xact_id(); COMMIT; END LOOP; END $$");
            PostgresSinkConfig config = SinkDatabase.config(builder(old));
            try (PostgresExactlyOnceWriter writer = writer(config, OptionalLong.empty())) {
                commit(config, checkpoint(writer, 1, "a", "b"));
            }
            try (TestPostgres restored = TestPostgres.start(directory.resolve("restored"))) {
                dumpAndRestore(old, restored, config);
                PostgresSinkBuilder builder = builder(restored);

                assertThatThrownBy(() -> SinkDatabase.config(builder))
                        .as("the new run's id would be an xid of the younger server: older than the restored runs")
                        .isInstanceOf(IllegalStateException.class)
                        .hasMessageContaining("PostgreSQL sink prefix 'job' has run ")
                        .hasMessageContaining("a transaction id this server has not issued yet: the database was"
                                + " restored from a logical backup (pg_dump) of another server")
                        .hasMessageContaining("docs/backup-restore.md");

                // the runbook: the runs and writer claims of the old server mean nothing on this one
                restored.execute("DELETE FROM " + PostgresTableOptions.DEFAULT_WRITERS + " WHERE sink_prefix = '"
                        + PREFIX + "'", "DELETE FROM " + PostgresTableOptions.DEFAULT_RUNS + " WHERE sink_prefix = '"
                        + PREFIX + "'");
                PostgresSinkConfig fresh = SinkDatabase.config(builder);
                try (PostgresExactlyOnceWriter writer = writer(fresh, OptionalLong.empty())) {
                    commit(fresh, checkpoint(writer, 1, "a", "c"));
                }
                assertThat(SinkDatabase.deliveries(restored)).isEqualTo(Map.of("a", 2, "b", 1, "c", 1));
            }
        }
    }

    private static PostgresSinkBuilder builder(TestPostgres server) {
        return SinkDatabase.builder(server, PREFIX);
    }

    private PostgresExactlyOnceWriter writer(PostgresSinkConfig config, OptionalLong restored) throws IOException {
        return SinkDatabase.writer(config, ++attempts, restored);
    }

    /** What pg_dump and pg_restore carry: the tables and their committed rows, nothing else. */
    private static void dumpAndRestore(TestPostgres from, TestPostgres to, PostgresSinkConfig config)
            throws SQLException {
        try (Connection source = from.connect(); Connection target = to.connect()) {
            config.schema().createIfMissing(target);
            for (String table : config.schema().tableNames()) {
                try (Statement read = source.createStatement(); ResultSet rows = read.executeQuery("SELECT * FROM " + table)) {
                    int columns = rows.getMetaData().getColumnCount();
                    String placeholders = String.join(", ", Collections.nCopies(columns, "?"));
                    try (PreparedStatement insert = target.prepareStatement(
                            "INSERT INTO " + table + " SELECT * FROM json_populate_record(NULL::" + table
                                    + ", json_build_object(" + placeholders.replace("?", "?, ?") + "))")) {
                        while (rows.next()) {
                            for (int i = 1; i <= columns; i++) {
                                insert.setString(2 * i - 1, rows.getMetaData().getColumnName(i));
                                insert.setString(2 * i, rows.getString(i));
                            }
                            insert.executeUpdate();
                        }
                    }
                }
            }
        }
    }
}
