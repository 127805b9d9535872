package io.onceflow.chaos;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.onceflow.sink.postgres.internal.ProtocolHooks;
import io.onceflow.testing.Eventually;
import io.onceflow.testing.Ledger;
import io.onceflow.testing.cluster.ClusterHarness;
import io.onceflow.testing.cluster.ContinuousProducer;
import io.onceflow.testing.cluster.FlinkRestClient;
import io.onceflow.testing.cluster.FlinkStandaloneCluster;
import io.onceflow.testing.cluster.InputDrain;
import io.onceflow.testing.cluster.MarkerFilePause;
import io.onceflow.tools.audit.CommittedTopicReader;
import io.onceflow.tools.generator.EventGenerator;
import java.io.IOException;
import java.math.BigDecimal;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.TreeMap;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * The exactly-once guarantee on a real deployment: a Flink standalone cluster (JobManager and two
 * TaskManagers, each its own JVM), a Kafka broker and PostgreSQL as their own processes, the job jar
 * submitted over REST. While a producer keeps writing events with duplicates, poison and records the
 * database refuses (a CHECK constraint of the user's), the run kills TaskManagers with
 * {@code kill -9} (some during a checkpoint) and starts fresh ones, pauses TaskManagers with SIGSTOP
 * past the heartbeat timeout, each with a restarting writer stopped before its claim, and wakes them
 * with SIGCONT once the job runs elsewhere (the writer wakes up as a zombie after its successor
 * claimed, and must defer or be refused), kills and restarts the broker, restarts PostgreSQL, and
 * upgrades the job through a savepoint with another parallelism and changed settings, and (when the
 * plan has JobManager failovers: {@code -Pchaos}) kills the JobManager of a cluster with ZooKeeper
 * high availability and starts a new one, which recovers the job and numbers its attempts from 0.
 * The job's database role has
 * hostile defaults (short idle, transaction, statement and lock timeouts, serializable and read-only
 * transactions, asynchronous commit). Once the producer
 * stopped and the job drained, the audit command (its own JVM, the job's configuration, JSON report)
 * must find every id exactly once in the output topic, once in PostgreSQL's table or, for the refused
 * ones, its rejects table, every poison record once in the dead-letter topic, and no prepared
 * transaction left; and the job must never have gone more than two minutes without a completed
 * checkpoint.
 *
 * <p>Sizes come from {@link ChaosPlan}: a short run by default, {@code mvn -Pchaos verify} for the long one.
 */
class ClusterChaosIT {
    /** The name of the topics, consumer group, prefixes and properties file of the job. */
    private static final String NAME = "chaos";
    private static final int TASK_MANAGERS = 2;
    private static final int SLOTS_PER_TASK_MANAGER = 2;
    private static final int INITIAL_PARALLELISM = 2;
    /** Each upgrade moves to the next parallelism: up, then down, then up to every slot. */
    private static final int[] UPGRADE_PARALLELISMS = {3, 1, 4};
    private static final int MAX_MESSAGE_BYTES = 4096;
    private static final int MAX_ID_LENGTH = 64;
    private static final Duration RECOVERY_TIMEOUT = Duration.ofMinutes(3);
    /**
     * The job catches up with the producer after the last fault at the parallelism of the last upgrade
     * (1): on a loaded 2-core machine the backlog of a long run takes a while (2.3M records, 20 minutes
     * not enough, in one -Pchaos run while other builds shared the cores). So the drain may take as long
     * as it keeps committing input; it fails when the committed offsets stand still for
     * {@link #LONGEST_STALL} (a stuck job), or after this overall limit.
     */
    private static final Duration DRAIN_LIMIT = Duration.ofMinutes(60);
    /** The longest the job may go without completing a checkpoint. */
    private static final Duration LONGEST_STALL = Duration.ofMinutes(2);
    /** How long a woken zombie TaskManager has to refuse; half of it more before the test removes it. */
    private static final Duration ZOMBIE_GRACE = Duration.ofSeconds(20);
    /** The log line of a writer that the fence refused (PostgresExactlyOnceWriter). */
    private static final String STALE_WRITER_REFUSED = "stale writer attempt refused";
    /** A writer closed before its first barrier, the only place it claims: a woken zombie never gets one. */
    private static final String WRITER_CLOSED_UNCLAIMED = "closed before its first checkpoint barrier";
    private static final String JOB_ROLE = "onceflow_chaos";
    private static final BigDecimal LEDGER_OPENING_BALANCE = new BigDecimal("100000000.00");
    /** Role defaults a DBA might have set, each of which would break a sink that did not pin its sessions. */
    private static final List<String> HOSTILE_ROLE_DEFAULTS = List.of(
            "idle_in_transaction_session_timeout = '1s'", "idle_session_timeout = '2s'", "transaction_timeout = '3s'",
            "default_transaction_isolation = 'serializable'", "default_transaction_read_only = on",
            "statement_timeout = '3s'", "lock_timeout = '100ms'", "synchronous_commit = off");

    private ClusterHarness harness;
    private FlinkRestClient rest;
    private final Map<String, String> jobSettings = new TreeMap<>();
    /** Where {@link #writeJobProperties} last wrote {@link #jobSettings}, for the job's and the audit's {@code --config}. */
    private Path jobProperties;
    private final Map<ChaosPlan.Fault, Integer> faultsDone = new EnumMap<>(ChaosPlan.Fault.class);
    private volatile String jobId;
    private long restartsOfEarlierJobs;
    private int killsDuringCheckpoint;
    private int effectStatementsCancelled;
    private int wokenWritersStopped;

    @Test
    void everyIdExactlyOnceThroughKillsRestartsAndUpgrades() throws Exception {
        ChaosPlan plan = ChaosPlan.fromSystemProperties();
        Random random = new Random(plan.seed());
        System.out.println("chaos plan " + plan);
        long started = System.nanoTime();
        Path haStorage = Files.createTempDirectory("onceflow-chaos-ha");
        try (JobManagerHa ha = JobManagerHa.startIf(plan.jobManagerFailovers() > 0, haStorage, NAME);
                ClusterHarness cluster = ClusterHarness.start(TASK_MANAGERS, SLOTS_PER_TASK_MANAGER, ha.flinkSettings())) {
            harness = cluster;
            rest = cluster.flink().rest();
            defineJob(cluster);
            String jarId = rest.uploadJar(ClusterHarness.jobJar());
            jobId = rest.runJar(jarId, jobArgs(INITIAL_PARALLELISM), null);
            // the job's start created the tables; now the user's rule that some accepted events break
            cluster.postgres().execute("ALTER TABLE onceflow_events ADD CONSTRAINT chaos_refuses CHECK (payload->>'"
                    + ContinuousProducer.REFUSED_FIELD + "' IS NULL)");
            awaitRecovered(0);

            try (ProgressWatch progress = new ProgressWatch();
                    ContinuousProducer producer = new ContinuousProducer(cluster.kafka().bootstrapServers(),
                    jobSettings.get("input.topics"), plan.minimumEvents(), plan.eventsPerSecond(),
                    MAX_MESSAGE_BYTES, MAX_ID_LENGTH)) {
                producer.start();
                List<ChaosPlan.Fault> faults = plan.faultsInOrder(random);
                for (ChaosPlan.Fault fault : faults) {
                    Thread.sleep(2_000 + random.nextInt(6_000));
                    System.out.printf("%6.1fs  %s (%d records produced)%n", seconds(started), fault,
                            producer.recordsSent());
                    inflict(fault, random);
                }
                ContinuousProducer.GroundTruth truth = producer.stopAndAwait(Duration.ofMinutes(30).toMillis());
                System.out.printf("%6.1fs  producer done: %s%n", seconds(started), truth);

                awaitDrained();
                System.out.printf("%6.1fs  drained%n", seconds(started));
                Duration longestStall = progress.longestStall();
                long zombieSessionsEnded = cluster.flink().logLinesContaining("terminating the session of an older attempt");
                long zombiesStopped = cluster.flink().logLinesContaining(STALE_WRITER_REFUSED);
                long restarts = restartsOfEarlierJobs + Math.max(0, rest.jobMetric(jobId, "numRestarts"));
                ClusterHarness.AuditOutcome audit = cluster.audit(jobArgs(0), Duration.ofMinutes(10));
                JsonNode report = audit.report();
                System.out.printf("%6.1fs  audit exit %d%n%s%n", seconds(started), audit.exitCode(), report);
                System.out.printf("SUMMARY events=%d uniqueIds=%d poison=%d refusedByDatabase=%d faults=%s"
                                + " killsDuringCheckpoint=%d effectStatementsCancelled=%d zombieSessionsEnded=%d"
                                + " zombieAttemptsStopped=%d jobRestarts=%d"
                                + " longestStallSeconds=%d auditClean=%s durationSeconds=%.0f seed=%d%n",
                        truth.records(), truth.uniqueIds(), truth.poisonRecords(), truth.refusedIds(), faultsDone,
                        killsDuringCheckpoint, effectStatementsCancelled, zombieSessionsEnded, zombiesStopped, restarts, longestStall.toSeconds(),
                        report.path("clean").asBoolean(), seconds(started), plan.seed());

                if (!report.path("problems").isEmpty()) {
                    Path kept = Path.of("target", "chaos-logs", "seed-" + plan.seed());
                    cluster.flink().copyLogsTo(kept);
                    System.out.println("the cluster's logs are kept in " + kept.toAbsolutePath());
                }
                assertThat(report.path("problems")).as("audit problems").isEmpty();
                assertThat(audit.exitCode()).as("audit exit code").isZero();
                assertThat(report.path("input").path("records").asLong()).as("input records").isEqualTo(truth.records());
                assertThat(report.path("input").path("uniqueIds").asLong()).as("unique ids").isEqualTo(truth.uniqueIds());
                assertThat(report.path("input").path("duplicates").asLong()).as("duplicates in the input").isPositive();
                assertThat(report.path("output").path("records").asLong()).as("output records")
                        .isEqualTo(truth.uniqueIds());
                assertThat(report.path("deadLetters").path("records").asLong()).as("dead letters")
                        .isEqualTo(truth.poisonRecords());
                assertThat(report.path("postgres").path("rows").asLong()).as("PostgreSQL rows")
                        .isEqualTo(truth.uniqueIds() - truth.refusedIds());
                assertThat(report.path("postgres").path("rejected").path("count").asLong())
                        .as("rows refused by the database, each in the rejects table").isEqualTo(truth.refusedIds());
                assertThat(report.path("postgres").path("rejectsBySqlState").path("23514").asLong())
                        .as("refused by the CHECK constraint").isEqualTo(truth.refusedIds());
                assertThat(report.path("postgres").path("maxDeliveries").asLong()).as("max deliveries").isEqualTo(1);
                assertThat(report.path("postgres").path("effects").path("failed").path("count").asLong())
                        .as("effects recorded as failed: cancels and lost sessions are not the messages' fault").isZero();
                assertThat(report.path("postgres").path("resultsTopic").path("published").asLong())
                        .as("outcomes on the results topic, one per effect").isEqualTo(truth.uniqueIds() - truth.refusedIds());
                assertLedgerBalances(cluster, started);
                assertThat(longestStall).as("longest time without a completed checkpoint").isLessThan(LONGEST_STALL);
                // each pause asserted that its woken writer was closed unclaimed or refused; its successor had no
                // session to end
                assertThat(wokenWritersStopped).as("woken writers closed unclaimed or refused")
                        .isEqualTo(faultsDone.getOrDefault(ChaosPlan.Fault.PAUSE_TASK_MANAGER, 0));
                assertThat(truth.records()).isGreaterThanOrEqualTo(plan.minimumEvents());
                assertThat(faultsDone.values().stream().mapToInt(Integer::intValue).sum()).isEqualTo(faults.size());
            }
        }
    }

    /**
     * Every account's balance is its opening balance less its unique payments, summed from the input
     * topic itself, to the cent; and the ledger agrees with the inbox's recorded results.
     */
    private void assertLedgerBalances(ClusterHarness cluster, long started) throws SQLException {
        Ledger.PaymentTally tally = new Ledger.PaymentTally(EventGenerator.ID_HEADER);
        CommittedTopicReader.forBootstrapServers(cluster.kafka().bootstrapServers())
                .read(jobSettings.get("input.topics"), Duration.ofMinutes(5), tally);
        try (Connection ledger = cluster.postgres().connect()) {
            Ledger.Report report = Ledger.audit(ledger, "onceflow_events");
            System.out.printf("%6.1fs  LEDGER %s%n", seconds(started), report);
            assertThat(report.clean()).as("ledger audit: %s", report).isTrue();
            // each partition's payments in offset order (docs/effects.md, Order)
            System.out.printf("%6.1fs  ORDER %s%n", seconds(started),
                    report.ordered() ? "each partition in offset order" : "OUT OF ORDER " + report.outOfOrder);
            assertThat(report.outOfOrder).as("payments posted out of their partition's offset order").isEmpty();
            assertThat(Ledger.balances(ledger)).as("balances against the input's unique payments")
                    .isEqualTo(Ledger.expectedBalances(ledger, tally.paymentsByAccount()));
        }
    }

    /** Topics and the job's configuration, written to a properties file that the job and the audit both read. */
    private void defineJob(ClusterHarness cluster) {
        // the job also writes to PostgreSQL (which the run restarts); the audit checks its rows,
        // deliveries and leftover prepared transactions with the same properties file
        jobSettings.putAll(cluster.jobSettings(NAME, 4, 2));
        jobSettings.put("input.starting.offsets", "earliest");
        jobSettings.put("message.max.bytes", String.valueOf(MAX_MESSAGE_BYTES));
        jobSettings.put("message.id.max.length", String.valueOf(MAX_ID_LENGTH));
        jobSettings.put("checkpoint.interval", "1s");
        jobSettings.put("checkpoint.min.pause", "200ms");
        jobSettings.put("checkpoint.timeout", "1min");
        jobSettings.put("state.backend", "rocksdb");
        jobSettings.put("dedup.ttl", "7d");
        jobSettings.put("postgres.user", JOB_ROLE);
        // every payment debits an account of the ledger, once (plenty of funds: the expected balances
        // follow from the input alone)
        jobSettings.put("postgres.effect.function", Ledger.FUNCTION);
        jobSettings.put("postgres.effect.keys", Ledger.KEYS);
        // every outcome published once, in order, through kills, pauses and upgrades: the audit reads it back
        cluster.kafka().createTopic(NAME + "-results", 3);
        jobSettings.put("postgres.effect.results.topic", NAME + "-results");
        cluster.postgres().execute("CREATE ROLE " + JOB_ROLE + " LOGIN", "GRANT CREATE, USAGE ON SCHEMA public TO "
                + JOB_ROLE);
        try (Connection ledger = cluster.postgres().connect()) {
            Ledger.install(ledger);
            Ledger.openAccounts(ledger, EventGenerator.ACCOUNTS, LEDGER_OPENING_BALANCE, false);
        } catch (SQLException e) {
            throw new IllegalStateException("could not set up the ledger", e);
        }
        cluster.postgres().execute("GRANT USAGE ON SCHEMA ledger TO " + JOB_ROLE,
                "GRANT SELECT, UPDATE ON ledger.accounts TO " + JOB_ROLE);
        for (String setting : HOSTILE_ROLE_DEFAULTS) {
            cluster.postgres().execute("ALTER ROLE " + JOB_ROLE + " SET " + setting);
        }
        writeJobProperties();
    }

    private void writeJobProperties() {
        try {
            jobProperties = harness.writeJobProperties(NAME, jobSettings);
        } catch (IOException e) {
            throw new IllegalStateException("could not write the job's properties", e);
        }
    }

    /** {@code --config job.properties}, plus the parallelism when it is positive. */
    private List<String> jobArgs(int parallelism) {
        List<String> args = new ArrayList<>(List.of("--config", jobProperties.toString()));
        if (parallelism > 0) {
            args.addAll(List.of("--parallelism", String.valueOf(parallelism)));
        }
        return args;
    }

    private void inflict(ChaosPlan.Fault fault, Random random) throws Exception {
        long checkpointsBefore = completedCheckpoints();
        switch (fault) {
            case KILL_TASK_MANAGER -> killTaskManager(random);
            case PAUSE_TASK_MANAGER -> {
                pauseTaskManagerUntilTheJobRunsElsewhere();
                checkpointsBefore = completedCheckpoints();
            }
            case RESTART_KAFKA_BROKER -> harness.kafka().killAndRestart();
            case RESTART_POSTGRES -> harness.postgres().restart();
            case UPGRADE_WITH_RESCALE -> {
                upgrade(faultsDone.getOrDefault(fault, 0));
                checkpointsBefore = 0;
            }
            case CANCEL_EFFECTS -> cancelEffects();
            case KILL_JOB_MANAGER -> {
                // the new JobManager's metrics and checkpoint counts start from 0
                restartsOfEarlierJobs += Math.max(0, rest.jobMetric(jobId, "numRestarts"));
                harness.flink().killJobManager();
                harness.flink().restartJobManager();
                checkpointsBefore = 0;
            }
        }
        faultsDone.merge(fault, 1, Integer::sum);
        awaitRecovered(checkpointsBefore);
    }

    /**
     * Cancels the effect workers' statements while they call the effect (a DBA's {@code
     * pg_cancel_backend}), then cuts their sessions off ({@code pg_terminate_backend}, as a lost
     * connection): neither is the messages' fault, so no effect may be recorded as failed, and every
     * one is applied once (the ledger's audit).
     */
    private void cancelEffects() throws Exception {
        String effectSessions = "FROM pg_stat_activity WHERE application_name LIKE 'onceflow-%-effects-%'";
        List<String> cancelled = new ArrayList<>();
        // right after a restart the workers may all be idle for a while (a restarted worker waits for
        // the transactions prepared at its start to commit): then the sessions are only ended
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (cancelled.isEmpty() && System.nanoTime() - deadline < 0) {
            cancelled.addAll(harness.postgres().rows("SELECT pid " + effectSessions + " AND state = 'active'"
                    + " AND pg_cancel_backend(pid)"));
            Thread.sleep(5);
        }
        Thread.sleep(500);
        List<String> terminated = harness.postgres().rows("SELECT pid " + effectSessions + " AND pg_terminate_backend(pid)");
        effectStatementsCancelled += cancelled.size();
        System.out.println("        cancelled " + cancelled.size() + " effect statements" + (cancelled.isEmpty()
                ? " (none was running for 60 s)" : "") + ", ended " + terminated.size() + " effect sessions");
    }

    /**
     * {@code kill -9} of a TaskManager that runs tasks, half of the time while a checkpoint is in
     * progress, then a fresh TaskManager in its place.
     */
    private void killTaskManager(Random random) throws Exception {
        FlinkStandaloneCluster flink = harness.flink();
        FlinkStandaloneCluster.TaskManager victim = busyTaskManager(random);
        if (random.nextBoolean() && awaitCheckpointInProgress(Duration.ofSeconds(15))) {
            killsDuringCheckpoint++;
        }
        flink.kill(victim);
        flink.startTaskManager();
    }

    /**
     * A zombie that reaches the database after its successor. The fault ends the job's writer
     * sessions (as a DBA or a cut connection would), so the job restarts; the first writer that
     * reaches its fence in that restart stops there (a {@link MarkerFilePause} armed at {@link
     * ProtocolHooks.Step#FENCE_OPENING}, before it reads any claim) and its TaskManager is frozen
     * with SIGSTOP (its sockets, PostgreSQL session included, stay open) past the heartbeat timeout,
     * with a fresh TaskManager in its place. Once the job has recovered elsewhere, SIGCONT wakes it
     * and the writer goes on: it claims only at a barrier, which never comes (its task is failed when
     * its TaskManager finds its job gone), or is refused, touching nothing (its log line in that
     * TaskManager's log, asserted here; the audit shows it touched nothing). Were it to claim, it would
     * end its successor's session and roll back its prepared transactions. After
     * a grace period the old TaskManager is removed.
     */
    private void pauseTaskManagerUntilTheJobRunsElsewhere() throws Exception {
        FlinkStandaloneCluster flink = harness.flink();
        Path pausePoints = flink.pausePoints();
        Path reached = pausePoints.resolve(ProtocolHooks.Step.FENCE_OPENING + ".reached");
        Path release = pausePoints.resolve(ProtocolHooks.Step.FENCE_OPENING + ".release");
        Files.deleteIfExists(reached);
        Files.deleteIfExists(release);
        Files.createFile(MarkerFilePause.armed(pausePoints, ProtocolHooks.Step.FENCE_OPENING.name()));
        List<String> ended = harness.postgres().rows("SELECT pid FROM pg_stat_activity WHERE application_name LIKE"
                + " 'onceflow-" + NAME + "-writer-%' AND pg_terminate_backend(pid)");
        long pid = Eventually.awaitValue("a restarted writer reached its fence", RECOVERY_TIMEOUT, Duration.ofMillis(20),
                () -> Files.exists(reached) && !Files.readString(reached).isBlank()
                        ? Optional.of(Long.parseLong(Files.readString(reached).strip())) : Optional.<Long>empty());
        FlinkStandaloneCluster.TaskManager sleeper = flink.taskManagers().stream()
                .filter(tm -> tm.process().pid() == pid).findFirst()
                .orElseThrow(() -> new IllegalStateException("no TaskManager has pid " + pid));
        long stoppedBefore = stoppedWriters(sleeper);
        sleeper.process().pause();
        flink.startTaskManager();
        System.out.println("        ended " + ended.size() + " writer sessions; paused " + sleeper.resourceId()
                + " with a writer at its fence; the JobManager gives up on it within "
                + flink.heartbeatTimeout().toSeconds() + " s");
        // No checkpoint completes while one of its TaskManagers is frozen: the count at the loss is
        // the baseline of the recovery (the one taken before the fault may be passed already).
        awaitTaskManagerLost(sleeper, flink.heartbeatTimeout().plus(RECOVERY_TIMEOUT));
        awaitRecovered(completedCheckpoints());
        printWriterSessions("after the recovery");
        sleeper.process().resume();
        Files.createFile(release);
        System.out.println("        resumed " + sleeper.resourceId() + " and released its writer");
        Eventually.await("the woken writer was closed unclaimed ('" + WRITER_CLOSED_UNCLAIMED + "') or was refused ('"
                + STALE_WRITER_REFUSED
                + "') in " + sleeper.resourceId() + "'s log", ZOMBIE_GRACE, Duration.ofMillis(250),
                () -> stoppedWriters(sleeper) > stoppedBefore);
        wokenWritersStopped++;
        Thread.sleep(ZOMBIE_GRACE.toMillis() / 2);
        printWriterSessions("after the grace period");
        flink.kill(sleeper);
    }

    /** The writers of {@code taskManager} closed unclaimed or refused, from its log. */
    private long stoppedWriters(FlinkStandaloneCluster.TaskManager taskManager) {
        FlinkStandaloneCluster flink = harness.flink();
        return flink.logLinesContaining(taskManager, WRITER_CLOSED_UNCLAIMED) + flink.logLinesContaining(taskManager,
                STALE_WRITER_REFUSED);
    }

    private void awaitTaskManagerLost(FlinkStandaloneCluster.TaskManager taskManager, Duration timeout) throws Exception {
        Eventually.await(taskManager.resourceId() + " declared lost within " + timeout, timeout,
                Duration.ofMillis(250), () -> {
                    try {
                        return rest.taskManagers().stream().noneMatch(tm -> tm.id().equals(taskManager.resourceId()));
                    } catch (IOException jobManagerBusy) {
                        return false; // ask again
                    }
                });
    }

    /** The sink writers' sessions and the fence's advisory locks, to read a pause's timeline. */
    private void printWriterSessions(String when) {
        List<String> sessions = harness.postgres().rows("SELECT a.pid, a.application_name, a.client_port, a.state,"
                + " round(extract(epoch FROM clock_timestamp() - a.state_change)) AS idle_s,"
                + " (SELECT string_agg(l.objid::text, ',') FROM pg_locks l WHERE l.pid = a.pid AND l.locktype = 'advisory')"
                + " AS locked FROM pg_stat_activity a WHERE a.application_name LIKE 'onceflow-%writer%' ORDER BY 2, 1");
        System.out.println("        writer sessions " + when + ": " + sessions);
    }

    private FlinkStandaloneCluster.TaskManager busyTaskManager(Random random) throws IOException {
        FlinkStandaloneCluster flink = harness.flink();
        List<String> busy = rest.taskManagers().stream()
                .filter(FlinkRestClient.TaskManagerSlots::runsTasks)
                .map(FlinkRestClient.TaskManagerSlots::id)
                .collect(Collectors.toList());
        List<FlinkStandaloneCluster.TaskManager> candidates = flink.taskManagers().stream()
                .filter(tm -> busy.contains(tm.resourceId()))
                .collect(Collectors.toList());
        if (candidates.isEmpty()) {
            candidates = flink.taskManagers();
        }
        return candidates.get(random.nextInt(candidates.size()));
    }

    private boolean awaitCheckpointInProgress(Duration timeout) throws Exception {
        return Eventually.holdsWithin(timeout, Duration.ofMillis(5),
                () -> rest.checkpointCounts(jobId).path("in_progress").asInt() > 0);
    }

    /**
     * Stop with a savepoint, then run the freshly uploaded jar from it with another parallelism and
     * changed settings (a longer dedup TTL, another checkpoint interval), as a new job version would.
     */
    private void upgrade(int upgradesBefore) throws Exception {
        String savepoint = null;
        long restartsOfThisJob = 0;
        for (int attempt = 1; savepoint == null; attempt++) {
            // a savepoint needs every task running; a restart may have begun since the last fault's
            // recovery, as an operator would find too: wait for the job to run, and try again
            awaitRecovered(completedCheckpoints());
            restartsOfThisJob = Math.max(0, rest.jobMetric(jobId, "numRestarts"));
            try {
                savepoint = rest.stopWithSavepoint(jobId, harness.flink().savepointDirectory(), Duration.ofMinutes(3));
            } catch (IllegalStateException e) {
                if (attempt == 3 || !String.valueOf(e.getMessage()).contains("is not being executed at the moment")) {
                    throw e;
                }
                System.out.println("        stop with savepoint refused while the job restarts; trying again. Its"
                        + " latest exceptions: " + rest.exceptions(jobId).path("exceptionHistory").path("entries")
                                .findValuesAsText("exceptionName"));
            }
        }
        restartsOfEarlierJobs += restartsOfThisJob;
        int parallelism = UPGRADE_PARALLELISMS[upgradesBefore % UPGRADE_PARALLELISMS.length];
        jobSettings.put("dedup.ttl", (14 + 7 * upgradesBefore) + "d");
        jobSettings.put("checkpoint.interval", upgradesBefore % 2 == 0 ? "1500ms" : "1s");
        writeJobProperties();
        String jarId = rest.uploadJar(ClusterHarness.jobJar());
        jobId = rest.runJar(jarId, jobArgs(parallelism), savepoint);
        System.out.println("        upgraded from " + savepoint + " to parallelism " + parallelism);
    }

    private long completedCheckpoints() throws IOException {
        return rest.checkpointCounts(jobId).path("completed").asLong();
    }

    /** Waits until every task runs again and a checkpoint has completed since the fault (so the job makes progress). */
    private void awaitRecovered(long completedCheckpointsBefore) throws Exception {
        Eventually.await("recovered within " + RECOVERY_TIMEOUT, RECOVERY_TIMEOUT, Duration.ofMillis(250), () -> {
            try {
                if (rest.isFullyRunning(jobId) && completedCheckpoints() > completedCheckpointsBefore) {
                    return true;
                }
                assertThat(rest.job(jobId).path("state").asText()).as("job state").isNotIn("FAILED", "CANCELED", "FINISHED");
            } catch (IOException jobManagerBusy) {
                // ask again
            }
            return false;
        });
    }

    /**
     * Waits until the job's committed input offsets reach the end of the input (the job commits them
     * on checkpoint completion, with its transactions), then for two more checkpoints.
     */
    private void awaitDrained() throws Exception {
        InputDrain.await(harness.kafka(), jobSettings.get("input.topics"), jobSettings.get("input.group.id"),
                LONGEST_STALL, DRAIN_LIMIT);
        awaitRecovered(completedCheckpoints() + 1);
        Eventually.await("every queued effect applied", DRAIN_LIMIT, Duration.ofSeconds(1),
                () -> harness.postgres().rows("SELECT 1 FROM onceflow_events_effect_queue LIMIT 1").isEmpty());
        // the relays delete what they published but each partition's last outcome
        Eventually.await("every outcome published", DRAIN_LIMIT, Duration.ofSeconds(1),
                () -> harness.postgres().rows("SELECT count(*) = count(DISTINCT (source_topic, source_partition))"
                        + " FROM onceflow_events_outcomes").equals(List.of("t")));
    }

    /**
     * Samples the current job's completed checkpoints every second and keeps the longest time without
     * a new one (or a new job, which follows the upgrade's savepoint).
     */
    private final class ProgressWatch implements AutoCloseable {
        private final Thread thread = new Thread(this::watch, "chaos-progress-watch");
        private volatile boolean stopped;
        private volatile long longestStallNanos;

        ProgressWatch() {
            thread.setDaemon(true);
            thread.start();
        }

        private void watch() {
            String watchedJob = null;
            long lastCompleted = -1;
            long lastProgress = System.nanoTime();
            while (!stopped) {
                try {
                    String job = jobId;
                    long completed = rest.checkpointCounts(job).path("completed").asLong();
                    if (completed < lastCompleted && job.equals(watchedJob)) {
                        lastCompleted = completed; // a new JobManager counts from 0: not progress yet
                    }
                    // an upgrade's new job follows a completed savepoint: progress too
                    if (!job.equals(watchedJob) || completed > lastCompleted) {
                        lastProgress = System.nanoTime();
                        watchedJob = job;
                        lastCompleted = completed;
                    }
                } catch (IOException | RuntimeException jobManagerBusy) {
                    // a busy or restarting JobManager is no progress; keep the clock running
                }
                longestStallNanos = Math.max(longestStallNanos, System.nanoTime() - lastProgress);
                try {
                    Thread.sleep(1_000);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }

        Duration longestStall() {
            return Duration.ofNanos(longestStallNanos);
        }

        @Override
        public void close() throws InterruptedException {
            stopped = true;
            thread.interrupt();
            thread.join(5_000);
        }
    }

    private static double seconds(long startNanos) {
        return (System.nanoTime() - startNanos) / 1e9;
    }
}
