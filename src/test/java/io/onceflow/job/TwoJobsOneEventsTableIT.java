package io.onceflow.job;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.onceflow.api.EventProcessor;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.sink.postgres.options.PostgresTableOptions;
import io.onceflow.testing.MiniClusters;
import io.onceflow.testing.PipelineScenario;
import io.onceflow.testing.TestPostgres;
import java.time.Duration;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Two jobs left on the default events table in one database, with different sink prefixes and effect
 * functions: while the first has effects queued, the second's start is refused before it runs, naming
 * the first's prefix, so its function never applies the first's payments. Real Kafka and PostgreSQL.
 */
class TwoJobsOneEventsTableIT {
    private static final long RECORDS = 200;

    @RegisterExtension
    static final MiniClusterExtension FLINK = MiniClusters.fourSlots();

    @Test
    void theSecondJobOnTheDefaultTableIsRefusedWhileTheFirstsEffectsAreQueued() throws Exception {
        TestPostgres.TestDatabase database = TestPostgres.shared().newDatabase();
        // A's effect is never done (40001: retried, not the message's fault), so its effects stay queued
        database.execute("CREATE FUNCTION pay_a(message_id text, payload jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$"
                + " BEGIN RAISE EXCEPTION 'not yet' USING ERRCODE = 'serialization_failure'; END $$");
        database.execute("CREATE TABLE calls_b (id text)");
        database.execute("CREATE FUNCTION pay_b(message_id text, payload jsonb) RETURNS jsonb LANGUAGE sql AS $$"
                + " INSERT INTO calls_b VALUES (message_id) RETURNING jsonb_build_object('status', 'applied') $$");
        PipelineScenario first = onTheDefaultTable(new PipelineScenario("default-table-a"), database, "pay_a");
        PipelineScenario second = onTheDefaultTable(new PipelineScenario("default-table-b"), database, "pay_b");
        first.produce(RECORDS, 31);
        second.produce(RECORDS, 32);

        JobClient jobA = job(first.config()).executeAsync(first.name);
        try {
            awaitQueuedEffects(database);
            OnceflowConfig configB = second.config();
            String prefixA = first.config().postgres().orElseThrow().sinkPrefix();

            assertThatThrownBy(() -> job(configB))
                    .isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("effects are queued in onceflow_events_effect_queue by the sink " + prefixA
                            + " (postgres.sink.prefix)")
                    .hasMessageContaining("give this job its own postgres.table")
                    .hasMessageNotContaining("\n");
        } finally {
            jobA.cancel().get();
        }
        long[] calls = {-1};
        database.query("SELECT count(*) FROM calls_b", row -> calls[0] = row.getLong(1));
        assertThat(calls[0]).as("calls of B's function").isZero();
    }

    private static PipelineScenario onTheDefaultTable(PipelineScenario scenario, TestPostgres.TestDatabase database,
            String function) {
        return scenario.withPostgres(database).with("postgres.table", PostgresTableOptions.DEFAULT_EVENTS)
                .with("postgres.effect.function", function);
    }

    /** The job's start checks run here, before anything is submitted. */
    private static StreamExecutionEnvironment job(OnceflowConfig config) throws Exception {
        Configuration flink = Onceflow.flinkConfiguration(config);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(flink);
        Onceflow.job(config, EventProcessor.passThrough()).defineIn(env);
        return env;
    }

    private static void awaitQueuedEffects(TestPostgres.TestDatabase database) throws Exception {
        long deadline = System.nanoTime() + Duration.ofMinutes(2).toNanos();
        long[] queued = {0};
        while (queued[0] == 0) {
            assertThat(System.nanoTime() - deadline).as("effects of the first job queued in time").isNegative();
            Thread.sleep(200);
            // created by the first job's start
            database.query("SELECT count(*) FROM onceflow_events_effect_queue", row -> queued[0] = row.getLong(1));
        }
    }
}
