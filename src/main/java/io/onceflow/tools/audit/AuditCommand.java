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
import java.util.Properties;
import java.util.Set;
import org.apache.flink.annotation.Internal;
import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.common.KafkaException;

/**
 * {@code java -cp onceflow-job.jar:$FLINK_HOME/lib/* io.onceflow.tools.audit.AuditCommand --config
 * job.properties [--format text|json] [--read-timeout 120s]}: audits a stopped or drained
 * deployment with the same configuration the job uses: every accepted input id must have exactly
 * one outcome (see {@link Audit}). Prints the report per outcome; exits 0 when clean, 1 when an id
 * is lost or has two outcomes, 2 when it cannot audit (invalid configuration, a service that cannot
 * be used), with one line per problem.
 */
public final class AuditCommand {
    private static final String FORMAT = "format";
    private static final String READ_TIMEOUT = "read-timeout";

    /** What {@code --help} prints before the settings reference. */
    static final String COMMAND_USAGE = """
            Usage: bin/onceflow audit [--config FILE] [settings...] [--format text|json] [--read-timeout DURATION]
                   java -cp onceflow-<version>-job.jar:$FLINK_HOME/lib/* io.onceflow.tools.audit.AuditCommand \\
                       [--config FILE] [settings...] [--format text|json] [--read-timeout DURATION]

            Reconciles per message id what the job read (its input topics, judged as the job judges
            them) with what it wrote (the output and dead-letter topics as a read_committed consumer
            sees them, the PostgreSQL tables): every accepted id must have exactly one outcome, an
            output record (and its row, or its row in the rejects table) or a dead letter of the
            processor (REJECTED_BY_PROCESSOR, PROCESSOR_FAILED); every poison record its dead letter.
            Output ids the processor derived from an input id (e.g. id:refund) are accounted for by
            their source record. Run it on a stopped or drained job, with the job's own settings.

              --help, -h
                  Print this help and exit; anywhere among the arguments.
              --format text|json (default: text)
                  The report's format.
              --read-timeout DURATION (default: 120s)
                  How long to wait for each topic's committed end, e.g. 30s or 10min.

            Exit status: 0 clean; 1 findings (an id lost or with two outcomes, transactions left behind);
            2 nothing audited: invalid configuration or a service that cannot be used, one line per
            problem.

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
        ProgramArguments arguments = ProgramArguments.parse(args, Set.of(), Set.of(FORMAT, READ_TIMEOUT));
        String format = arguments.choice(FORMAT, List.of("text", "json"));
        Duration readTimeout = arguments.duration(READ_TIMEOUT, Duration.ofSeconds(120));
        OnceflowConfig config = arguments.config(System.getenv());
        Preflight.check(config, Preflight.Purpose.AUDIT);
        AuditReport report;
        try {
            report = forConfig(config).run(readTimeout);
        } catch (KafkaException | IllegalStateException e) {
            // a service failed or a read timed out after the preflight: no report, one line
            throw new CannotRunException(List.of(Preflight.withoutSecrets(Preflight.oneLine(problem("audit",
                    "stopped before it had read everything: " + e.getMessage(),
                    "Audit a stopped or drained job, and check that Kafka and PostgreSQL stay reachable.")), config)));
        }
        System.out.println("json".equals(format) ? report.toJson() : report.toText());
        return report.clean() ? ExitCode.CLEAN : ExitCode.FINDINGS;
    }

    /** The audit of the deployment {@code config} describes, judging input as the job does. */
    public static Audit forConfig(OnceflowConfig config) {
        Properties client = config.kafkaClientProperties();
        client.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, config.bootstrapServers());
        return new Audit(client, config.inputTopics(), config.outputTopic(), config.deadLetterTopic(),
                KafkaInput.deserializer(config.messageIdSourceSpec(), config.maxMessageBytes(), config.maxIdLength(),
                        config.postgres().isPresent(), config.jsonLimits()),
                config.postgres());
    }
}
