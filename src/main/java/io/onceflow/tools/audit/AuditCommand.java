package io.onceflow.tools.audit;

import io.onceflow.config.ConfigException;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.job.OnceflowJob;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.CommonClientConfigs;

/**
 * {@code java -cp onceflow-job.jar io.onceflow.tools.audit.AuditCommand --config job.properties
 * [--format text|json] [--read-timeout 120s]}: audits a running or stopped deployment with the same
 * configuration the job uses. Prints the report; exits 0 when clean, 1 when any id is missing or
 * duplicated, 2 on a configuration error.
 */
public final class AuditCommand {
    private AuditCommand() {}

    public static void main(String[] args) {
        List<String> jobArgs = new ArrayList<>();
        String format = "text";
        Duration readTimeout = Duration.ofSeconds(120);
        for (int i = 0; i < args.length; i++) {
            if ("--format".equals(args[i]) && i + 1 < args.length) {
                format = args[++i];
            } else if ("--read-timeout".equals(args[i]) && i + 1 < args.length) {
                readTimeout = Duration.parse("PT" + args[++i].toUpperCase());
            } else {
                jobArgs.add(args[i]);
            }
        }
        if (!format.equals("text") && !format.equals("json")) {
            System.err.println("--format: use text or json, not '" + format + "'");
            System.exit(2);
        }
        OnceflowConfig config;
        try {
            config = OnceflowConfig.fromArgs(jobArgs.toArray(new String[0]), System.getenv());
        } catch (ConfigException e) {
            System.err.println(e.getMessage());
            System.exit(2);
            return;
        }
        AuditReport report = forConfig(config).run(readTimeout);
        System.out.println("json".equals(format) ? report.toJson() : report.toText());
        System.exit(report.clean() ? 0 : 1);
    }

    /** The audit of the deployment {@code config} describes, judging input as the job does. */
    public static Audit forConfig(OnceflowConfig config) {
        Properties client = config.kafkaClientProperties();
        client.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, config.bootstrapServers());
        return new Audit(client, config.inputTopics(), config.outputTopic(), config.deadLetterTopic(),
                OnceflowJob.ingestDeserializer(config), config.postgres());
    }
}
