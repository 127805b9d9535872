package io.onceflow.tools.audit;

import static io.onceflow.config.ConfigException.problem;

import io.onceflow.cli.CannotRunException;
import io.onceflow.cli.CommandLineTool;
import io.onceflow.cli.ExitCode;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.config.ProgramArguments;
import io.onceflow.ingest.KafkaInput;
import io.onceflow.preflight.Preflight;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import org.apache.flink.annotation.Internal;
import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.common.KafkaException;

/**
 * {@code java -cp onceflow-job.jar:$FLINK_HOME/lib/* io.onceflow.tools.audit.AuditCommand --config
 * job.properties [--live [--recheck-for 60s]] [--format text|json] [--read-timeout 120s]}: audits a
 * deployment with the same configuration the job uses: every accepted input id must have exactly
 * one outcome (see {@link Audit}). Without {@code --live} it audits the whole topics, for a stopped
 * or drained job; with it, a running job up to its last completed checkpoint ({@link AuditScope}).
 * Prints the report per outcome; exits 0 when clean, 1 when an id is lost or has two outcomes, 2
 * when it cannot audit (invalid configuration, a service that cannot be used, no committed offsets
 * for a live audit), with one line per problem.
 */
public final class AuditCommand {
    private static final String FORMAT = "format";
    private static final String READ_TIMEOUT = "read-timeout";
    private static final String LIVE = "live";
    private static final String RECHECK_FOR = "recheck-for";
    /** A live audit looks again a checkpoint interval later, but not more often than this. */
    private static final Duration SHORTEST_PAUSE = Duration.ofSeconds(1);

    /** What {@code --help} prints before the settings reference. */
    static final String COMMAND_USAGE = """
            Usage: bin/onceflow audit [--config FILE] [settings...] [--live [--recheck-for DURATION]]
                                      [--format text|json] [--read-timeout DURATION]
                   java -cp onceflow-<version>-job.jar:$FLINK_HOME/lib/* io.onceflow.tools.audit.AuditCommand \\
                       [--config FILE] [settings...] [--live [--recheck-for DURATION]] [--format text|json] ...

            Reconciles per message id what the job read (its input topics, judged as the job judges
            them) with what it wrote (the output and dead-letter topics as a read_committed consumer
            sees them, the PostgreSQL tables): every accepted id must have exactly one outcome, an
            output record (and its row, or its row in the rejects table), a dead letter of the
            processor (REJECTED_BY_PROCESSOR, PROCESSOR_FAILED) or a filter record
            (FILTERED_BY_PROCESSOR); every poison record its dead letter. Output ids the processor
            derived from an input id (e.g. id:refund) are accounted for by their source record.
            Redeliveries a row absorbed (deliveries > 1, one output) and redeliveries after dedup.ttl
            are reported apart, not as problems. Use the job's own settings.

            Without --live it audits the whole topics: run it on a stopped or drained job (it warns
            when the job looks running). With --live it audits a running job without stopping it.

              --help, -h
                  Print this help and exit; anywhere among the arguments.
              --live
                  Audit a running job: each input partition up to the offset the job's consumer group
                  (input.group.id) committed at its last completed checkpoint. What the job did after
                  it is in flight, not audited; its prepared transactions and queued effects are not
                  problems. Needs Describe on the group.
              --recheck-for DURATION (default: two checkpoint.interval plus 30s)
                  With --live: the sinks commit a checkpoint's output a moment after its offsets, so
                  while the audit finds problems it reads everything again, a checkpoint.interval
                  later, for up to this long; only what persists is reported.
              --format text|json (default: text)
                  The report's format.
              --read-timeout DURATION (default: 120s)
                  How long to wait for each topic's committed end, e.g. 30s or 10min.

            Exit status: 0 clean; 1 findings (an id lost or with two outcomes, transactions left behind);
            2 nothing audited: invalid configuration, a service that cannot be used, or, with --live,
            no committed offsets in the job's group; one line per problem.

            """;

    private AuditCommand() {}

    public static void main(String[] args) throws Exception {
        CommandLineTool.run(AuditCommand.class, () -> execute(args));
    }

    /**
     * Audits as {@link #main} does, without ending the process: for a command-line tool that
     * dispatches to the audit.
     *
     * @return how the audit ended
     * @throws io.onceflow.config.ConfigException if the configuration is invalid
     * @throws CannotRunException if a service cannot be used
     */
    @Internal
    public static ExitCode execute(String[] args) {
        if (ProgramArguments.helpRequested(args)) {
            System.out.println(COMMAND_USAGE + OnceflowConfig.usage());
            return ExitCode.CLEAN;
        }
        ProgramArguments arguments = ProgramArguments.parse(args, Set.of(LIVE), Set.of(FORMAT, READ_TIMEOUT, RECHECK_FOR));
        String format = arguments.choice(FORMAT, List.of("text", "json"));
        Duration readTimeout = arguments.duration(READ_TIMEOUT, Duration.ofSeconds(120));
        boolean live = arguments.flag(LIVE);
        Duration recheckFor = arguments.duration(RECHECK_FOR, null);
        if (recheckFor != null && !live) {
            arguments.optionProblem(problem("--" + RECHECK_FOR, "applies to a live audit only",
                    "Add --live to audit a running job, or leave --" + RECHECK_FOR + " out."));
        }
        OnceflowConfig config = arguments.config(System.getenv());
        Preflight.check(config, Preflight.Purpose.AUDIT);
        AuditReport report;
        try {
            Audit audit = forConfig(config);
            report = live ? audit.runLive(readTimeout, liveScope(config, readTimeout),
                    recheckFor != null ? recheckFor : config.checkpointInterval().multipliedBy(2).plusSeconds(30),
                    max(config.checkpointInterval(), SHORTEST_PAUSE)) : wholeTopicAudit(audit, config, readTimeout);
        } catch (KafkaException | IllegalStateException e) {
            // a service failed or a read timed out after the preflight: no report, one line
            throw new CannotRunException(List.of(Preflight.withoutSecrets(Preflight.oneLine(problem("audit",
                    "stopped before it had read everything: " + e.getMessage(),
                    "Check that Kafka and PostgreSQL stay reachable; audit a running job with --live.")), config)));
        }
        System.out.println("json".equals(format) ? report.toJson() : report.toText());
        return report.clean() ? ExitCode.CLEAN : ExitCode.FINDINGS;
    }

    /**
     * The audit of a stopped or drained job, with a warning when the job's group has not committed
     * offsets past all its input (or they cannot be read): then the job has not finished, and its
     * unfinished input looks lost.
     */
    static AuditReport wholeTopicAudit(Audit audit, OnceflowConfig config, Duration readTimeout) {
        Optional<AuditScope> jobPosition = Optional.empty();
        String unknownPosition = null;
        try {
            jobPosition = Optional.of(liveScope(config, readTimeout));
        } catch (CannotRunException e) {
            unknownPosition = String.join("; ", e.problems());
        } catch (KafkaException | IllegalStateException e) {
            unknownPosition = Preflight.withoutSecrets(String.valueOf(e.getMessage()), config);
        }
        AuditReport report = audit.run(readTimeout, jobPosition);
        if (unknownPosition != null) {
            report.warnings.add("could not read how far the job has checkpointed its input (" + unknownPosition
                    + "). If it has not read and checkpointed all of it, what it has not done looks lost here.");
        }
        return report;
    }

    /**
     * The input a live audit of the deployment {@code config} describes covers: up to the offsets its
     * consumer group committed at its last completed checkpoint.
     *
     * @throws CannotRunException if the group has no committed offsets, or may not be described
     */
    public static AuditScope liveScope(OnceflowConfig config, Duration timeout) {
        try {
            return AuditScope.ofRunningJob(clientProperties(config), config.groupId(), config.inputTopics(), timeout);
        } catch (CannotRunException e) {
            throw new CannotRunException(e.problems().stream()
                    .map(line -> Preflight.withoutSecrets(line, config)).toList());
        }
    }

    /** The audit of the deployment {@code config} describes, judging input as the job does. */
    public static Audit forConfig(OnceflowConfig config) {
        return new Audit(clientProperties(config), config.inputTopics(), config.outputTopic(), config.deadLetterTopic(),
                KafkaInput.deserializer(config.messageIdSourceSpec(), config.maxMessageBytes(), config.maxIdLength(),
                        config.postgres().isPresent(), config.jsonLimits()),
                config.postgres(), config.dedupTtl());
    }

    private static Properties clientProperties(OnceflowConfig config) {
        Properties client = config.kafkaClientProperties();
        client.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, config.bootstrapServers());
        return client;
    }

    private static Duration max(Duration a, Duration b) {
        return a.compareTo(b) >= 0 ? a : b;
    }
}
