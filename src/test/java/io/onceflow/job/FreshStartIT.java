package io.onceflow.job;

import io.onceflow.api.EventProcessor;
import io.onceflow.job.Onceflow;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.sink.kafka.PendingKafkaTransactions;
import io.onceflow.sink.postgres.internal.PendingTransactionsException;
import io.onceflow.testing.FailureInjector;
import io.onceflow.testing.MiniClusters;
import io.onceflow.testing.PipelineScenario;
import io.onceflow.tools.audit.AuditReport;
import io.onceflow.tools.generator.GeneratedInput;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.configuration.StateRecoveryOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;


/**
 * After a crash, the last completed checkpoint's output may still be pending in the sinks while the
 * consumer group's offsets are past its input: a fresh start would discard it. The start refuses,
 * names the latest retained checkpoint and the command to resume from it; resuming from it then
 * delivers every id exactly once.
 */
class FreshStartIT {
    private static final long RECORDS = 6_000;

    @RegisterExtension
    static final MiniClusterExtension FLINK = MiniClusters.fourSlots();

    @TempDir
    Path checkpoints;

    @Test
    void aFreshStartAfterACrashIsRefusedAndResumingFromTheNamedCheckpointLosesNothing() throws Exception {
        PipelineScenario scenario = new PipelineScenario("fresh-start").withPostgres()
                .with("checkpoint.dir", checkpoints.toUri().toString());
        GeneratedInput truth = scenario.produce(RECORDS, 11);
        OnceflowConfig config = scenario.config();

        JobClient crashed = crashBetweenASnapshotAndItsCompletion(scenario, config);
        String latest = latestRetainedCheckpoint(crashed);

        assertThatThrownBy(() -> JobStart.start(config, environment(config, null)))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("from an earlier run")
                .hasMessageContaining("fresh.start.pending=discard")
                .hasMessageContaining("resume with: flink run -s ")
                .hasMessageContaining(crashed.getJobID() + "/" + Path.of(java.net.URI.create(latest)).getFileName());

        // Unbounded, as in production (a bounded source restored with splits already at their stopping
        // offsets never finishes): run until the output holds every id, then stop with a savepoint.
        StreamExecutionEnvironment resumed = environment(config, latest);
        Onceflow.job(config, EventProcessor.passThrough()).defineIn(resumed);
        JobClient job = resumed.executeAsync(scenario.name + "-resumed");
        scenario.awaitOutput(job, truth.uniqueIds().size());
        job.stopWithSavepoint(false, checkpoints.resolve("savepoints").toUri().toString(), SavepointFormatType.CANONICAL)
                .get(2, TimeUnit.MINUTES);

        AuditReport audit = scenario.audit();
        assertThat(audit.problems()).isEmpty();
        assertThat(audit.outputRecords()).isEqualTo(truth.uniqueIds().size());
        assertThat(audit.postgresRows()).isEqualTo(truth.uniqueIds().size());
    }

    /**
     * Each sink refuses on its own: first Kafka's open transactions (checked first), then, once the
     * broker has aborted those (as it does after kafka.transaction.timeout, while prepared PostgreSQL
     * transactions never time out), PostgreSQL's prepared transactions. Each assertion names what
     * only its own refusal says, so it fails when that refusal is removed.
     */
    @Test
    void kafkaAndPostgresEachRefuseAFreshStartOnTheirOwn() throws Exception {
        PipelineScenario scenario = new PipelineScenario("fresh-each").withPostgres()
                .with("checkpoint.dir", checkpoints.toUri().toString());
        scenario.produce(RECORDS, 13);
        OnceflowConfig config = scenario.config();
        JobClient crashed = crashBetweenASnapshotAndItsCompletion(scenario, config);
        String postgresPrefix = config.postgres().orElseThrow().sinkPrefix();

        assertThatThrownBy(() -> JobStart.start(config, environment(config, null)))
                .isInstanceOf(JobStart.FreshStartRefused.class)
                .hasMessageStartingWith("kafka.transactional.id.prefix '" + config.transactionalIdPrefix() + "' has ")
                .hasMessageContaining(" open Kafka transaction(s) from an earlier run: [")
                .hasMessageNotContaining("PostgreSQL");

        // as the brokers do when they outlive their timeout
        List<String> pending = pendingKafkaTransactions(config);
        assertThat(pending).isNotEmpty();
        PendingKafkaTransactions.abort(config.bootstrapServers(), config.kafkaClientProperties(), pending);
        assertThat(pendingKafkaTransactions(config)).isEmpty();

        assertThatThrownBy(() -> JobStart.start(config, environment(config, null)))
                .isInstanceOf(JobStart.FreshStartRefused.class)
                .hasCauseInstanceOf(PendingTransactionsException.class)
                .hasMessageStartingWith("PostgreSQL sink prefix '" + postgresPrefix + "' has ")
                .hasMessageContaining(" prepared transaction(s) from an earlier run (job " + crashed.getJobID())
                .hasMessageContaining("The latest retained checkpoint of job " + crashed.getJobID() + " is ")
                .hasMessageNotContaining("Kafka transaction");
    }

    @Test
    void discardingPendingWorkIsAChoiceTheUserMakes() throws Exception {
        PipelineScenario scenario = new PipelineScenario("fresh-discard").withPostgres()
                .with("checkpoint.dir", checkpoints.toUri().toString());
        scenario.produce(RECORDS, 12);
        OnceflowConfig config = scenario.config();
        crashBetweenASnapshotAndItsCompletion(scenario, config);

        OnceflowConfig discarding = scenario.with("fresh.start.pending", "discard").config();
        assertThat(pendingKafkaTransactions(config)).as("the crashed run's open transactions").isNotEmpty();
        assertThat(JobStart.start(discarding, environment(discarding, null)).postgres()).isPresent();
        // aborted by the start: the new run's writers, under tags of their own, would not
        assertThat(pendingKafkaTransactions(config)).as("left open after the start").isEmpty();
    }

    /** A first run that dies between a checkpoint's snapshot and its completion, and is not restarted. */
    private static JobClient crashBetweenASnapshotAndItsCompletion(PipelineScenario scenario, OnceflowConfig config)
            throws Exception {
        FailureInjector crash = new FailureInjector(scenario.name, FailureInjector.Moment.AFTER_SNAPSHOT_BEFORE_COMPLETION,
                RECORDS / 3).pacedAt(500);
        StreamExecutionEnvironment first = environment(config, null);
        Onceflow.job(config, crash).boundedAtLatestOffsets().defineIn(first);
        JobClient crashed = first.executeAsync(scenario.name);
        assertThatThrownBy(() -> crashed.getJobExecutionResult().get(2, TimeUnit.MINUTES))
                .isInstanceOf(ExecutionException.class);
        assertThat(FailureInjector.fired(scenario.name)).isTrue();
        return crashed;
    }

    private static List<String> pendingKafkaTransactions(OnceflowConfig config) throws Exception {
        return PendingKafkaTransactions.list(
                config.bootstrapServers(), config.kafkaClientProperties(), config.transactionalIdPrefix());
    }

    private static StreamExecutionEnvironment environment(OnceflowConfig config, String restoreFrom) {
        Configuration flink = Onceflow.flinkConfiguration(config);
        flink.set(RestartStrategyOptions.RESTART_STRATEGY, "none");
        if (restoreFrom != null) {
            flink.set(StateRecoveryOptions.SAVEPOINT_PATH, restoreFrom);
        }
        return StreamExecutionEnvironment.getExecutionEnvironment(flink);
    }

    private String latestRetainedCheckpoint(JobClient job) throws Exception {
        Path jobDirectory = checkpoints.resolve(job.getJobID().toString());
        try (Stream<Path> children = Files.list(jobDirectory)) {
            return children
                    .filter(path -> path.getFileName().toString().startsWith("chk-"))
                    .filter(path -> Files.exists(path.resolve("_metadata")))
                    .max(Comparator.comparingLong(path -> Long.parseLong(path.getFileName().toString().substring(4))))
                    .orElseThrow(() -> new AssertionError("no retained checkpoint in " + jobDirectory))
                    .toUri()
                    .toString();
        }
    }
}
