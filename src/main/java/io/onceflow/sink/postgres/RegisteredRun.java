package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import org.apache.flink.annotation.VisibleForTesting;

/**
 * Proof that a run of the sink prefix was registered ({@link PostgresRunRegistry#startRun}) or
 * continued ({@link PostgresRunRegistry#continueRun}) after the database passed the start checks:
 * the only way to obtain the exactly-once {@link PostgresSink}, whose writers claim their subtasks
 * for this run.
 */
public final class RegisteredRun {
    private final PostgresSinkConfig config;

    RegisteredRun(PostgresSinkConfig config) {
        this.config = config;
    }

    /**
     * The run's number (the registering transaction's id): a newer run of the prefix has a greater
     * one, and the newest owns the prefix.
     */
    public long run() {
        return config.run();
    }

    /** The exactly-once sink of this run: the one to put into the job. */
    public PostgresSink sink() {
        return new PostgresSink(config);
    }

    @VisibleForTesting
    PostgresSinkConfig config() {
        return config;
    }

    @Override
    public String toString() {
        return "RegisteredRun{" + config + "}";
    }
}
