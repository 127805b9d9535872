package io.onceflow.job;

import io.onceflow.cli.CannotRunException;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.config.PendingWorkOnFreshStart;
import io.onceflow.preflight.Preflight;
import io.onceflow.sink.kafka.PendingKafkaTransactions;
import io.onceflow.sink.postgres.internal.PendingTransactionsException;
import io.onceflow.sink.postgres.PostgresRunRegistry;
import io.onceflow.sink.postgres.PostgresSink;
import io.onceflow.sink.postgres.RegisteredRun;
import io.onceflow.sink.postgres.options.StartMode;
import java.io.IOException;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeoutException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.flink.annotation.Internal;
import org.apache.flink.api.common.JobID;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.HighAvailabilityOptions;
import org.apache.flink.configuration.PipelineOptionsInternal;
import org.apache.flink.configuration.ReadableConfig;
import org.apache.flink.configuration.StateRecoveryOptions;
import org.apache.flink.core.fs.FileStatus;
import org.apache.flink.core.fs.FileSystem;
import org.apache.flink.core.fs.Path;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What has to happen once per submission, before the job graph is built, for the sinks to be safe
 * to start: decide how the job starts (restoring, fresh, fresh discarding pending output, or a
 * second execution of the same job after a JobManager failover), refuse a fresh start that would
 * discard an earlier run's pending output, and ask each sink to start (for the PostgreSQL sink:
 * register its run, see {@link PostgresRunRegistry#startRun}).
 *
 * <p>Why the fresh-start check: source offsets reach the consumer group when a checkpoint
 * completes, independently of the sinks' commits. After a crash, the transactions of the last
 * completed checkpoint may still be pending (Kafka: open until committed or timed out; PostgreSQL:
 * prepared), while the group's offsets are already past their input. A fresh start aborts them and
 * starts reading after that input: the output is lost. Resuming from the latest retained checkpoint
 * commits them instead; so a fresh start refuses while anything is pending, names that checkpoint
 * and the command to resume from it, unless {@code fresh.start.pending=discard} says otherwise.
 */
@Internal
public final class JobStart {
    private static final Pattern CHECKPOINT_DIRECTORY = Pattern.compile("chk-(\\d+)");
    private static final Logger LOG = LoggerFactory.getLogger(JobStart.class);

    private JobStart() {}

    /** A fresh start refused because the sinks hold an earlier run's pending output; says what to do. */
    public static final class FreshStartRefused extends IllegalStateException {
        private static final long serialVersionUID = 1L;

        FreshStartRefused(String message, Throwable cause) {
            super(message, cause);
        }
    }

    /**
     * Starts the sinks of the job {@code config} describes, to run in {@code env}.
     *
     * @param env its configuration tells whether the job restores a savepoint or checkpoint, and
     *     where checkpoints are retained
     * @return the sinks to put into the job
     * @throws FreshStartRefused with what to do, when a fresh start would discard pending output
     * @throws IllegalStateException with what to do, when a check fails
     */
    public static OnceflowPipeline.Sinks start(OnceflowConfig config, StreamExecutionEnvironment env)
            throws SQLException {
        return start(config, env, ResumeCommand.UNKNOWN, config.kafkaTransactionTimeout());
    }

    /**
     * As {@link #start(OnceflowConfig, StreamExecutionEnvironment)}, naming {@code resume} in a
     * refusal: the job's real jar and arguments, when it was started from a command line.
     *
     * @param kafkaTransactionTimeout the Kafka sinks' transaction timeout, as the start check decided it
     *     ({@link Preflight.Result#kafkaTransactionTimeout()})
     */
    public static OnceflowPipeline.Sinks start(OnceflowConfig config, StreamExecutionEnvironment env,
            ResumeCommand resume, Duration kafkaTransactionTimeout) throws SQLException {
        return start(config, env.getConfiguration(), env.getParallelism(), FlinkSettings.jobName(config), resume,
                kafkaTransactionTimeout);
    }

    /**
     * @param flinkConfig the environment's configuration, which holds the savepoint to restore
     *     ({@code execution.state-recovery.path}, set by {@code flink run -s} and by the REST API's
     *     {@code savepointPath}) and the cluster's checkpoint directory
     * @return the sinks to put into the job
     * @throws FreshStartRefused with what to do, when a fresh start would discard pending output
     * @throws IllegalStateException with what to do, when a check fails
     */
    static OnceflowPipeline.Sinks start(OnceflowConfig config, ReadableConfig flinkConfig, int parallelism,
            String jobName, ResumeCommand resume, Duration kafkaTransactionTimeout) throws SQLException {
        boolean restoring = flinkConfig.getOptional(StateRecoveryOptions.SAVEPOINT_PATH).isPresent();
        boolean discardPending = config.pendingWorkOnFreshStart() == PendingWorkOnFreshStart.DISCARD;
        Optional<String> checkpointDir = config.checkpointDir()
                .or(() -> flinkConfig.getOptional(CheckpointingOptions.CHECKPOINTS_DIRECTORY));
        Optional<String> fixedJobId = fixedJobId(flinkConfig);
        if (fixedJobId.isPresent()) {
            Optional<OnceflowPipeline.Sinks> continued =
                    continueSameJob(config, parallelism, fixedJobId.get(), checkpointDir, kafkaTransactionTimeout);
            if (continued.isPresent()) {
                return continued.get();
            }
        }
        if (!restoring) {
            List<String> pending = pendingKafkaTransactions(config);
            if (!discardPending) {
                refuseWhileKafkaTransactionsPending(config, pending, checkpointDir, resume);
            } else if (!pending.isEmpty()) {
                // each attempt writes under its own tag, so the new run's writers leave an earlier
                // run's transactions alone: they would hold back read_committed consumers until
                // the transaction timeout
                LOG.warn("fresh.start.pending=discard: aborting {} open Kafka transaction(s) of an earlier run: {}",
                        pending.size(), pending);
                PendingKafkaTransactions.abort(config.bootstrapServers(), config.kafkaClientProperties(), pending);
            }
        }
        JobSinks sinks = new JobSinks(config, kafkaTransactionTimeout);
        Optional<PostgresSink> startedPostgres = Optional.empty();
        if (sinks.postgresAtLeastOnce()) {
            try {
                sinks.postgres().build().startAtLeastOnce(discardPending);
            } catch (PendingTransactionsException e) {
                throw new FreshStartRefused(e.getMessage() + resumeAdvice(checkpointDir, e.previousJobId(), resume), e);
            }
        }
        if (sinks.postgresExactlyOnce()) {
            StartMode mode = restoring ? StartMode.RESTORE
                    : discardPending ? StartMode.FRESH_DISCARDING_PENDING : StartMode.FRESH;
            try {
                startedPostgres = Optional.of(sinks.postgres().build()
                        .startRun(parallelism, mode, jobName, fixedJobId.orElse(null)).sink());
            } catch (PendingTransactionsException e) {
                throw new FreshStartRefused(e.getMessage() + resumeAdvice(checkpointDir, e.previousJobId(), resume), e);
            }
        }
        return sinks.assemble(startedPostgres);
    }

    /**
     * The job id Flink will give the job, when it is fixed per deployment before submission: in
     * application mode with high availability the Kubernetes operator sets a new one for each
     * deployment and keeps it for JobManager failovers. Flink's own default there is derived from
     * the HA cluster id (in older versions the zero id), the same for every deployment of a cluster:
     * it cannot tell a second execution of one job from a new deployment, so it counts as none.
     */
    static Optional<String> fixedJobId(ReadableConfig flinkConfig) {
        String clusterDefault = new JobID(flinkConfig.get(HighAvailabilityOptions.HA_CLUSTER_ID).hashCode(), 0)
                .toHexString();
        return flinkConfig.getOptional(PipelineOptionsInternal.PIPELINE_FIXED_JOB_ID)
                .filter(id -> !id.equals(clusterDefault) && !id.equals(new JobID(0, 0).toHexString()));
    }

    /**
     * The sinks of a second execution of the job {@code flinkJobId}'s {@code main}, or empty if this
     * is its first. In application mode with high availability a new JobManager runs {@code main}
     * again after a failover, and {@code execute} attaches to the recovered job instead of
     * submitting the graph {@code main} built; the recovered job's writers are connected, its
     * transactions pending, and its PostgreSQL writers belong to the run the first execution
     * registered. So the fresh-start and live-writer checks would refuse the job's own work, and a
     * new run would stop its writers as replaced: a second execution does neither.
     *
     * <p>It is recognised by the job's checkpoint directory (created when the job first started) or
     * by the run the first execution registered with this job id (written before its submission, so
     * also there when the JobManager failed before the first checkpoint).
     */
    private static Optional<OnceflowPipeline.Sinks> continueSameJob(OnceflowConfig config, int parallelism,
            String flinkJobId, Optional<String> checkpointDir, Duration kafkaTransactionTimeout) throws SQLException {
        JobSinks sinks = new JobSinks(config, kafkaTransactionTimeout);
        boolean postgresExactlyOnce = sinks.postgresExactlyOnce();
        Optional<PostgresSink> continuedPostgres = postgresExactlyOnce
                ? sinks.postgres().build().continueRun(parallelism, flinkJobId).map(RegisteredRun::sink)
                : Optional.empty();
        boolean startedBefore = continuedPostgres.isPresent() || checkpointsExist(checkpointDir, flinkJobId);
        if (!startedBefore || (postgresExactlyOnce && continuedPostgres.isEmpty())) {
            // a first execution, or one whose run is not recorded (tables of an older version):
            // start as before, with the checks
            return Optional.empty();
        }
        LOG.info("Job {} started before (a JobManager failover runs main again): it continues{} without the"
                + " start checks", flinkJobId, continuedPostgres.map(sink -> " its PostgreSQL sink's run").orElse(""));
        return Optional.of(sinks.assemble(continuedPostgres));
    }

    private static boolean checkpointsExist(Optional<String> checkpointDir, String flinkJobId) {
        if (checkpointDir.isEmpty()) {
            return false;
        }
        Path jobDirectory = new Path(checkpointDir.get(), flinkJobId);
        try {
            return jobDirectory.getFileSystem().exists(jobDirectory);
        } catch (IOException e) {
            LOG.warn("Could not check for the job's checkpoint directory {}: taking the start for a first one",
                    jobDirectory, e);
            return false;
        }
    }

    private static void refuseWhileKafkaTransactionsPending(OnceflowConfig config, List<String> pending,
            Optional<String> checkpointDir, ResumeCommand resume) {
        if (!pending.isEmpty()) {
            throw new FreshStartRefused("kafka.transactional.id.prefix '" + config.transactionalIdPrefix() + "' has "
                    + pending.size() + " open Kafka transaction(s) from an earlier run: " + pending + ". A fresh start"
                    + " aborts them, and the output of the checkpoints that completed but were not committed yet is"
                    + " lost (their input offsets may already be committed to the consumer group). Resume from the"
                    + " earlier run's latest retained checkpoint, or start fresh with fresh.start.pending=discard to"
                    + " discard them knowingly." + resumeAdvice(checkpointDir, Optional.empty(), resume), null);
        }
    }

    /** The transactional ids of this job's sinks whose transaction is neither committed nor aborted. */
    private static List<String> pendingKafkaTransactions(OnceflowConfig config) {
        try {
            return PendingKafkaTransactions.list(
                    config.bootstrapServers(), config.kafkaClientProperties(), config.transactionalIdPrefix());
        } catch (ExecutionException | TimeoutException e) {
            throw new CannotRunException(List.of(Preflight.withoutSecrets(Preflight.oneLine(
                    "kafka.bootstrap.servers: could not list the Kafka transactions at " + config.bootstrapServers()
                    + " to check for an earlier run's pending output (" + e.getMessage() + "). Check that the"
                    + " brokers answer and that the job's principal may describe its transactional ids."), config)));
        }
    }

    /**
     * Names the latest retained checkpoint, of {@code jobId} when known, and the command that
     * resumes from it.
     */
    static String resumeAdvice(Optional<String> checkpointDir, Optional<String> jobId, ResumeCommand resume) {
        if (checkpointDir.isEmpty()) {
            return " No checkpoint directory is configured (checkpoint.dir or execution.checkpointing.dir), so the"
                    + " latest retained checkpoint cannot be named: find its chk-<n> directory and run "
                    + resume.flinkRunFrom("<chk-n directory>") + ".";
        }
        Optional<Path> latest;
        try {
            latest = latestRetainedCheckpoint(new Path(checkpointDir.get()), jobId);
        } catch (IOException e) {
            return " The checkpoint directory " + checkpointDir.get() + " could not be read (" + e.getMessage() + ").";
        }
        if (latest.isEmpty()) {
            return " No retained checkpoint was found under " + checkpointDir.get()
                    + jobId.map(id -> "/" + id).orElse("") + ".";
        }
        return " The latest retained checkpoint" + (jobId.isPresent() ? " of job " + jobId.get() : "")
                + " is " + latest.get() + "; resume with: " + resume.flinkRunFrom(latest.get().toString())
                + (jobId.isPresent() ? "" : " (check that it is this job's)") + ".";
    }

    /**
     * The {@code chk-<n>} directory with the highest n that holds a {@code _metadata} file, under
     * {@code <dir>/<jobId>}, or under any job's directory when the job is unknown (then the most
     * recently written one).
     */
    static Optional<Path> latestRetainedCheckpoint(Path checkpointDir, Optional<String> jobId) throws IOException {
        FileSystem fs = checkpointDir.getFileSystem();
        List<Path> jobDirectories = new ArrayList<>();
        if (jobId.isPresent()) {
            jobDirectories.add(new Path(checkpointDir, jobId.get()));
        } else if (fs.exists(checkpointDir)) {
            for (FileStatus status : fs.listStatus(checkpointDir)) {
                if (status.isDir()) {
                    jobDirectories.add(status.getPath());
                }
            }
        }
        Path latest = null;
        long latestId = -1;
        long latestWritten = -1;
        for (Path jobDirectory : jobDirectories) {
            if (!fs.exists(jobDirectory)) {
                continue;
            }
            for (FileStatus status : fs.listStatus(jobDirectory)) {
                Matcher matcher = CHECKPOINT_DIRECTORY.matcher(status.getPath().getName());
                Path metadata = new Path(status.getPath(), "_metadata");
                if (!status.isDir() || !matcher.matches() || !fs.exists(metadata)) {
                    continue;
                }
                long id = Long.parseLong(matcher.group(1));
                long written = fs.getFileStatus(metadata).getModificationTime();
                boolean better = jobId.isPresent() ? id > latestId : written > latestWritten;
                if (better) {
                    latest = status.getPath();
                    latestId = id;
                    latestWritten = written;
                }
            }
        }
        return Optional.ofNullable(latest);
    }
}
