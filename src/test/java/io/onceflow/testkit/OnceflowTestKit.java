package io.onceflow.testkit;

import io.onceflow.api.EventProcessor;
import io.onceflow.testing.PipelineScenario;
import io.onceflow.testing.TestKafka;

/**
 * The embedded stack to test your {@link EventProcessor} (and your SQL effect function) on:
 * a real Kafka broker (KRaft, in this JVM), a real PostgreSQL 17 (started on first use, its own
 * process) and a Flink MiniCluster per run. Each {@link #job} gets topics and a database of its
 * own, so tests share the services without sharing data; the services stop when the JVM exits.
 *
 * <pre>{@code
 * OnceflowTestKit kit = OnceflowTestKit.start();
 * Outcomes outcomes = kit.run(new PaymentProcessor(),
 *         TestRecord.of("pay-1", "{\"amount\": 10.00}"),
 *         TestRecord.of("pay-2", "{\"amount\": -1}"));
 * assertEquals("REJECTED_BY_PROCESSOR", outcomes.deadLetterOf("pay-2").reason());
 * outcomes.assertExactlyOnce();
 *
 * Outcomes ledger = kit.job(new PaymentProcessor())
 *         .withSql(schemaAndFunctionSql).withEffect("ledger.apply_payment")
 *         .failOnceAfter(100)
 *         .run(records);
 * }</pre>
 *
 * <p>Setting {@code ONCEFLOW_TEST_KAFKA_BOOTSTRAP} or {@code ONCEFLOW_TEST_POSTGRES_URL} (with
 * {@code _USER}, {@code _PASSWORD}) runs against external services instead. What to put in your
 * pom, and why the JVM needs two flags: {@code docs/testing-your-processor.md}.
 */
public final class OnceflowTestKit {
    private static final OnceflowTestKit INSTANCE = new OnceflowTestKit();

    private OnceflowTestKit() {}

    /** Starts the Kafka broker of this JVM (once; later calls return at once); PostgreSQL starts on first use. */
    public static OnceflowTestKit start() {
        TestKafka.shared();
        return INSTANCE;
    }

    /** A job running {@code processor}, to set up and {@link JobUnderTest#run run} once. */
    public JobUnderTest job(EventProcessor processor) {
        return new JobUnderTest(new PipelineScenario("testkit"), processor);
    }

    /** Runs {@code processor} on {@code records}, with the Kafka sinks only: {@code job(processor).run(records)}. */
    public Outcomes run(EventProcessor processor, TestRecord... records) throws Exception {
        return job(processor).run(records);
    }
}
