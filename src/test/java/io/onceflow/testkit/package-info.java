/**
 * The public test kit: run your {@link io.onceflow.api.EventProcessor} (and your SQL effect
 * function) in onceflow's whole pipeline on a real Kafka broker, a real PostgreSQL and a Flink
 * MiniCluster, and check the outcome of each input id. Start at {@link
 * io.onceflow.testkit.OnceflowTestKit}; published in onceflow's test jar ({@code
 * <classifier>tests</classifier>}). The dependencies and the JVM flags it needs, and a whole test:
 * {@code docs/testing-your-processor.md}. The other packages of the test jar are onceflow's own
 * test fixtures, with no promise of stability.
 */
package io.onceflow.testkit;
