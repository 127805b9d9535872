package io.onceflow.sink.postgres;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.sql.Connection;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;

class PostgresSchemaTest {
    @Test
    void ddlCreatesBothTablesIdempotently() {
        String ddl = new PostgresSchema("sink.events", "sink.commit_log").ddl();

        assertThat(ddl).contains("CREATE TABLE IF NOT EXISTS sink.events (\n    id text PRIMARY KEY,\n"
                + "    payload jsonb,\n    source_topic text,\n    source_partition int,\n    source_offset bigint,\n"
                + "    first_processed_at timestamptz NOT NULL DEFAULT now(),\n"
                + "    deliveries int NOT NULL DEFAULT 1\n);");
        assertThat(ddl).contains("CREATE TABLE IF NOT EXISTS sink.commit_log (\n    gid text PRIMARY KEY,\n"
                + "    committed_at timestamptz NOT NULL DEFAULT clock_timestamp()\n);");
    }

    @Test
    void theDdlRunsAsIsAndTwice() throws Exception {
        SinkDatabase db = new SinkDatabase();
        db.execute("CREATE SCHEMA sink");
        String ddl = new PostgresSchema("sink.events", "sink.commit_log").ddl();

        db.execute(ddl);
        db.execute(ddl);

        db.execute("INSERT INTO sink.events (id, payload) VALUES ('a', '{}')");
        db.execute("INSERT INTO sink.commit_log (gid) VALUES ('g')");
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
    void maxPreparedTransactionsMustCoverTwoPerSubtask() throws Exception {
        SinkDatabase db = new SinkDatabase();
        PostgresSink sink = db.builder("check").build();

        sink.checkPreconditions(32); // the test server has 64

        assertThatThrownBy(() -> sink.checkPreconditions(40))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("max_prepared_transactions = 64")
                .hasMessageContaining("parallelism 40 needs at least 80")
                .hasMessageContaining("max_prepared_transactions = 80 or more in postgresql.conf")
                .hasMessageContaining("restart PostgreSQL");
    }

    @Test
    void theWriterChecksTooAndFailsBeforeWriting() {
        SinkDatabase db = new SinkDatabase();

        assertThatThrownBy(() -> new PostgresExactlyOnceWriter(db.config("check"), 0, 40, OptionalLong.empty()))
                .hasMessageContaining("could not start")
                .rootCause()
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("parallelism 40 needs at least 80");
    }
}
