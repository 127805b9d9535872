package io.onceflow.config;

import java.util.HashMap;
import java.util.Map;

/** Settings for tests: the required keys only, each with a valid value. */
public final class ValidSettings {
    private ValidSettings() {}

    /** Returns a new, modifiable map holding a valid value for every required key. */
    public static Map<String, String> required() {
        Map<String, String> settings = new HashMap<>();
        settings.put("kafka.bootstrap.servers", "kafka-1:9092,kafka-2:9092");
        settings.put("input.topics", "payments,refunds");
        settings.put("input.group.id", "onceflow-payments");
        settings.put("output.topic", "payments-deduplicated");
        settings.put("dead.letter.topic", "payments-dead-letters");
        settings.put("kafka.transactional.id.prefix", "onceflow-payments");
        return settings;
    }

    /** Returns {@link #required()} plus a PostgreSQL sink with a password. */
    static Map<String, String> withPostgres(String password) {
        Map<String, String> settings = required();
        settings.put("postgres.url", "jdbc:postgresql://db:5432/payments");
        settings.put("postgres.user", "onceflow");
        settings.put("postgres.password", password);
        settings.put("postgres.sink.prefix", "payments_pg");
        return settings;
    }
}
