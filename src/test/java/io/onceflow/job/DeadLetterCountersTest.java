package io.onceflow.job;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.ingest.DeadLetter;
import io.onceflow.ingest.DeadLetterReason;
import io.onceflow.testing.cluster.PrometheusScrape;
import io.onceflow.testing.cluster.ServiceClasspath;
import java.util.Map;
import java.util.Set;
import org.apache.flink.api.common.JobID;
import org.apache.flink.metrics.MetricConfig;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.metrics.prometheus.PrometheusReporter;
import org.apache.flink.metrics.prometheus.PrometheusReporterFactory;
import org.apache.flink.runtime.clusterframework.types.ResourceID;
import org.apache.flink.runtime.executiongraph.ExecutionAttemptID;
import org.apache.flink.runtime.metrics.filter.ReporterFilter;
import org.apache.flink.runtime.metrics.groups.FrontMetricGroup;
import org.apache.flink.runtime.metrics.groups.ReporterScopedSettings;
import org.apache.flink.runtime.metrics.groups.TaskManagerMetricGroup;
import org.apache.flink.runtime.metrics.util.TestingMetricRegistry;
import org.junit.jupiter.api.Test;

/**
 * The dead-letter counters as Flink's real Prometheus reporter serves them (the reporter flink-conf/
 * enables), scraped over HTTP: the reason as a label of one name, and the deprecated per-reason names.
 */
class DeadLetterCountersTest {
    private static final String OPERATOR = "flink_taskmanager_job_task_operator_";

    @Test
    void theReasonIsALabelOfOneNameAndTheDeprecatedNamesCountTheSame() throws Exception {
        int port = ServiceClasspath.freePort();
        MetricConfig properties = new MetricConfig();
        properties.setProperty("port", String.valueOf(port));
        PrometheusReporter reporter = new PrometheusReporterFactory().createMetricReporter(properties);
        ReporterScopedSettings<?> settings = new ReporterScopedSettings<>(0, '.', ReporterFilter.getNoOpFilter(), Set.of(), Map.of());
        TestingMetricRegistry registry = TestingMetricRegistry.builder()
                .setRegisterConsumer((metric, name, group) ->
                        reporter.notifyOfAddedMetric(metric, name, new FrontMetricGroup<>(settings, group)))
                .build();
        try {
            MetricGroup operator = TaskManagerMetricGroup.createTaskManagerMetricGroup(registry, "localhost", ResourceID.generate())
                    .addJob(new JobID(), "job").addTask(ExecutionAttemptID.randomId(), "task").getOrAddOperator("Ingest");
            DeadLetterCounters counters = new DeadLetterCounters(operator, reason -> !reason.fromProcessor());
            counters.count(deadLetter(DeadLetterReason.MALFORMED_JSON));
            counters.count(deadLetter(DeadLetterReason.MALFORMED_JSON));
            counters.count(deadLetter(DeadLetterReason.MISSING_ID));

            PrometheusScrape scrape = PrometheusScrape.of(port);

            assertThat(scrape.samples(OPERATOR + "reason_deadLetters"))
                    .filteredOn(sample -> sample.labels().get("reason").equals("MALFORMED_JSON"))
                    .singleElement().extracting(PrometheusScrape.Sample::value).isEqualTo(2.0);
            assertThat(scrape.samples(OPERATOR + "reason_deadLetters"))
                    .filteredOn(sample -> sample.labels().get("reason").equals("MISSING_ID"))
                    .singleElement().extracting(PrometheusScrape.Sample::value).isEqualTo(1.0);
            assertThat(scrape.samples(OPERATOR + "reason_deadLetters")).as("one series per reason the operator gives")
                    .extracting(sample -> sample.labels().get("reason"))
                    .doesNotContain(DeadLetterReason.REJECTED_BY_PROCESSOR.name(), DeadLetterReason.PROCESSOR_FAILED.name());
            assertThat(scrape.sum(OPERATOR + "deadLetters_MALFORMED_JSON")).as("the deprecated name").isEqualTo(2.0);
            assertThat(scrape.sum(OPERATOR + "deadLetters_MISSING_ID")).as("the deprecated name").isEqualTo(1.0);
        } finally {
            reporter.close();
        }
    }

    private static DeadLetter deadLetter(DeadLetterReason reason) {
        return new DeadLetter(null, null, reason, "bad", "in", 0, 0, 0L, Map.of());
    }
}
