package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.options.StartMode;
import io.onceflow.sink.postgres.internal.PostgresConnections;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSchema;
import io.onceflow.sink.postgres.internal.ServerChecks;
import io.onceflow.testing.TestPostgres;
import java.sql.Connection;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;


class PostgresSchemaTest {
    private static PostgresSchema schemaInSink() {
        return new PostgresSchema("sink.events", "sink.rejects", "sink.commit_log", "sink.runs", "sink.writers");
    }

    @Test
    void ddlCreatesEveryTableIdempotently() {
        String ddl = schemaInSink().ddl();

        assertThat(ddl).contains("CREATE TABLE IF NOT EXISTS sink.events (\n    id text PRIMARY KEY,\n"
                + "    payload jsonb,\n    source_topic text,\n    source_partition int,\n    source_offset bigint,\n"
                + "    first_processed_at timestamptz NOT NULL DEFAULT now(),\n"
                + "    deliveries int NOT NULL DEFAULT 1,\n    result jsonb,\n    effect_transaction text\n);");
        assertThat(ddl).as("no index whose predicate mentions result: storing a result stays a HOT update")
                .doesNotContain("ON sink.events (").contains("CREATE TABLE IF NOT EXISTS sink.events_effect_queue (\n"
                        + "    id text PRIMARY KEY,\n    source_partition int,\n    source_offset bigint,\n"
                        + "    queued_at timestamptz NOT NULL DEFAULT clock_timestamp(),\n    effect_transaction text,\n"
                        + "    sink_prefix text,\n    effect_function text,\n    failed_at timestamptz,\n    source_topic text,\n"
                        + "    queued_xid xid8\n);",
                        "CREATE INDEX IF NOT EXISTS events_effect_queue_partition_order ON sink.events_effect_queue"
                        + " ((coalesce(source_topic, '')), (coalesce(source_partition, -1)), source_offset)"
                        + " WHERE failed_at IS NULL;");
        assertThat(ddl).contains("CREATE TABLE IF NOT EXISTS sink.events_effect_log (\n    id text NOT NULL,\n"
                + "    action text NOT NULL,\n    reason text,\n    previous_result jsonb,\n");
        assertThat(ddl).contains("CREATE TABLE IF NOT EXISTS sink.commit_log (\n    gid text PRIMARY KEY,\n"
                + "    committed_at timestamptz NOT NULL DEFAULT clock_timestamp()\n);");
        assertThat(ddl).contains("CREATE TABLE IF NOT EXISTS sink.rejects (", "sql_state text NOT NULL",
                "CREATE TABLE IF NOT EXISTS sink.runs (", "PRIMARY KEY (sink_prefix, run)",
                "CREATE TABLE IF NOT EXISTS sink.writers (", "PRIMARY KEY (sink_prefix, subtask_index)");
    }

    @Test
    void everyTableHasItsOwnName() {
        assertThatThrownBy(() -> new PostgresSchema("events", "rejects", "log", "RUNS", "runs"))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("'runs' is used for two of the sink's tables");
    }

    @Test
    void theDdlRunsAsIsAndTwice() throws Exception {
        SinkDatabase db = new SinkDatabase();
        db.execute("CREATE SCHEMA sink");
        String ddl = schemaInSink().ddl();

        db.execute(ddl);
        db.execute(ddl);

        db.execute("INSERT INTO sink.events (id, payload) VALUES ('a', '{}')");
        db.execute("INSERT INTO sink.commit_log (gid) VALUES ('g')");
    }

    @Test
    void aRunsTableOfAnEarlierVersionGetsTheJobIdAndServerIdentityColumns() throws Exception {
        SinkDatabase db = new SinkDatabase();
        PostgresRunRegistry sink = db.builder("old").build();
        sink.startRun(1, StartMode.FRESH, "old version");
        // as earlier versions created it
        db.execute("ALTER TABLE onceflow_runs DROP COLUMN flink_job_id, DROP COLUMN system_identifier,"
                + " DROP COLUMN timeline_id");

        RegisteredRun started = sink.startRun(1, StartMode.RESTORE, "new version", "e5f6");
        assertThat(sink.continueRun(1, "e5f6").orElseThrow().config().run()).isEqualTo(started.config().run());
        assertThat(db.database.rows("SELECT r.system_identifier = c.system_identifier, r.timeline_id FROM"
                + " onceflow_runs r, pg_control_system() c WHERE r.run = " + started.config().run()))
                .as("the new run records the server it was registered on").containsExactly("t 1");
    }

    @Test
    void subtasksCreatingTheTablesAtOnceDoNotCollide() throws Exception {
        SinkDatabase db = new SinkDatabase();
        PostgresSinkConfig config = db.config("schema_race");
        ExecutorService pool = Executors.newFixedThreadPool(6);
        try {
            List<Callable<Void>> subtasks = new ArrayList<>();
            for (int i = 0; i < 6; i++) {
                subtasks.add(() -> {
                    try (Connection connection = PostgresConnections.open(config, "test")) {
                        config.schema().createIfMissing(connection);
                    }
                    return null;
                });
            }
            for (Future<Void> done : pool.invokeAll(subtasks)) {
                done.get();
            }
        } finally {
            pool.shutdownNow();
        }
        assertThat(db.deliveriesById()).isEmpty();
    }

    @Test
    void maxPreparedTransactionsMustCoverTwoPerSubtaskAndOneMorePerToleratedCheckpointFailure() throws Exception {
        SinkDatabase db = new SinkDatabase();
        PostgresRunRegistry sink = db.builder("check").build();

        sink.startRun(32, StartMode.FRESH, "job"); // the test server has 64

        assertThatThrownBy(() -> sink.startRun(40, StartMode.FRESH, "job"))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("max_prepared_transactions = 64")
                .hasMessageContaining("parallelism 40 and 0 tolerated checkpoint failures needs at least 80")
                .hasMessageContaining("max_prepared_transactions = 80 or more in postgresql.conf")
                .hasMessageContaining("restart PostgreSQL");
        assertThatThrownBy(() -> db.builder("check").setTolerableCheckpointFailures(2).build()
                        .startRun(20, StartMode.FRESH, "job"))
                .hasMessageContaining("parallelism 20 and 2 tolerated checkpoint failures needs at least 80");
        assertThat(ServerChecks.preparedTransactionsNeeded(3, 1)).isEqualTo(9);
    }

    @Test
    void theWriterChecksTooAndFailsBeforeWriting() {
        SinkDatabase db = new SinkDatabase();

        assertThatThrownBy(() -> SinkDatabase.writer(db.config("check"), db.attempt(0, 40, OptionalLong.empty())))
                .hasMessageContaining("could not start")
                .rootCause()
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("parallelism 40 and 0 tolerated checkpoint failures needs at least 80");
    }

    @Test
    void aDatabaseThatIsNotUtf8IsRefusedSayingHowToCreateOne() throws Exception {
        assumeTrue(TestPostgres.shared().canRestart(), "creates a database: embedded server only");
        SinkDatabase db = new SinkDatabase();
        String name = "latin1_" + Long.toHexString(System.nanoTime());
        db.execute("CREATE DATABASE " + name + " TEMPLATE template0 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C'");
        PostgresSinkBuilder latin1 = db.builder("check")
                .setJdbcUrl(db.database.jdbcUrl().replaceFirst("/onceflow_[a-z0-9]+", "/" + name));

        assertThatThrownBy(() -> latin1.build().startRun(1, StartMode.FRESH, "job"))
                .hasMessageContaining("server_encoding is LATIN1")
                .hasMessageContaining("ENCODING 'UTF8'");
    }
}
