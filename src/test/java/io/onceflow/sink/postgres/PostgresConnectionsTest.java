package io.onceflow.sink.postgres;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.sink.postgres.internal.PostgresConnections;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The sink's connections pin its timeouts (postgres.lock.timeout, postgres.statement.timeout). */
class PostgresConnectionsTest {
    @Test
    void everyConnectionPinsTheConfiguredTimeoutsOverTheDatabasesDefaults() throws Exception {
        SinkDatabase db = new SinkDatabase();
        // a DBA's defaults that the sink must not inherit
        db.execute("DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET lock_timeout = ''1s''', current_database());"
                + " EXECUTE format('ALTER DATABASE %I SET statement_timeout = ''5s''', current_database()); END $$");
        PostgresSinkBuilder builder = db.builder("pins")
                .setLockTimeout(Duration.ofSeconds(7))
                .setStatementTimeout(Duration.ofMinutes(3));

        try (Connection connection = PostgresConnections.open(builder.build().config(), "writer-0")) {
            assertThat(show(connection, "lock_timeout")).isEqualTo("7s");
            assertThat(show(connection, "statement_timeout")).isEqualTo("3min");
        }
    }

    private static String show(Connection connection, String setting) throws SQLException {
        try (Statement statement = connection.createStatement();
                ResultSet result = statement.executeQuery("SHOW " + setting)) {
            result.next();
            return result.getString(1);
        }
    }
}
