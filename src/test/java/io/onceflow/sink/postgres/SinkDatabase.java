package io.onceflow.sink.postgres;

import io.onceflow.ingest.Event;
import io.onceflow.testing.TestPostgres;
import io.onceflow.testing.TestPostgres.TestDatabase;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** A fresh database on the shared test server, and what the sink tests ask of it. */
final class SinkDatabase {
    static final String TABLE = PostgresSinkBuilder.DEFAULT_TABLE;

    final TestDatabase database = TestPostgres.shared().newDatabase();

    PostgresSinkBuilder builder(String sinkPrefix) {
        return PostgresSink.builder()
                .setJdbcUrl(database.jdbcUrl())
                .setUser(database.user())
                .setPassword(database.password())
                .setSinkPrefix(sinkPrefix)
                .setBatchSize(100)
                .setLockTimeout(Duration.ofSeconds(2))
                .setStatementTimeout(Duration.ofSeconds(20));
    }

    PostgresSinkConfig config(String sinkPrefix) {
        return config(builder(sinkPrefix));
    }

    static PostgresSinkConfig config(PostgresSinkBuilder builder) {
        return builder.build().config();
    }

    static Event event(String id) {
        byte[] payload = ("{\"id\":\"" + id + "\"}").getBytes(StandardCharsets.UTF_8);
        return new Event(id, payload, "input", 0, Math.abs(id.hashCode()), 0L, new HashMap<>());
    }

    /** deliveries by id, of every committed row. */
    Map<String, Integer> deliveriesById() throws SQLException {
        Map<String, Integer> deliveries = new HashMap<>();
        query("SELECT id, deliveries FROM " + TABLE, row -> deliveries.put(row.getString(1), row.getInt(2)));
        return deliveries;
    }

    /** The gids of this database's prepared transactions of {@code sinkPrefix}. */
    List<TransactionId> prepared(String sinkPrefix) throws SQLException {
        List<TransactionId> gids = new ArrayList<>();
        query("SELECT gid FROM pg_prepared_xacts WHERE database = current_database()",
                row -> TransactionId.parse(row.getString(1), sinkPrefix).ifPresent(gids::add));
        return gids;
    }

    void execute(String sql) throws SQLException {
        try (Connection connection = database.connect(); Statement statement = connection.createStatement()) {
            statement.execute(sql);
        }
    }

    interface RowConsumer {
        void accept(ResultSet row) throws SQLException;
    }

    void query(String sql, RowConsumer consumer) throws SQLException {
        try (Connection connection = database.connect();
                Statement statement = connection.createStatement();
                ResultSet rows = statement.executeQuery(sql)) {
            while (rows.next()) {
                consumer.accept(rows);
            }
        }
    }
}
