package io.onceflow.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.lang.reflect.Field;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.apache.flink.runtime.metrics.groups.AbstractMetricGroup;
import org.apache.logging.log4j.Level;
import org.apache.logging.log4j.Logger;
import org.apache.logging.log4j.core.LogEvent;
import org.apache.logging.log4j.core.LoggerContext;
import org.apache.logging.log4j.core.config.Configuration;
import org.apache.logging.log4j.core.config.ConfigurationFactory;
import org.apache.logging.log4j.core.config.ConfigurationSource;
import org.apache.logging.log4j.core.config.LoggerConfig;
import org.apache.logging.log4j.core.impl.Log4jLogEvent;
import org.apache.logging.log4j.message.SimpleMessage;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The log4j files in {@code flink-conf/}, loaded as Flink's scripts load them (a file named by the
 * system property {@code log.file}): the Kafka clients' rebootstrap flood and the known harmless metric
 * name collisions are dropped (also by the test kit's default, log4j2-test.properties), and everything
 * else of interest still reaches the file.
 */
class FlinkLoggingConfigTest {
    private static final Path FLINK_CONF = Path.of("flink-conf");

    @TempDir Path directory;

    @ParameterizedTest
    @ValueSource(strings = {"log4j.properties", "log4j-console.properties", "log4j-cli.properties"})
    void theRebootstrapFloodIsQuietAndWarningsRemain(String file) throws IOException {
        String log = logThrough(file, context -> {
            for (int i = 0; i < 1000; i++) {
                context.getLogger("org.apache.kafka.clients.admin.internals.AdminMetadataManager")
                        .info("[AdminClient clientId=x] Rebootstrapping with [localhost/127.0.0.1:9]");
                context.getLogger("org.apache.kafka.clients.Metadata").info("Rebootstrapping with [localhost:9]");
            }
            context.getLogger("org.apache.kafka.clients.admin.internals.AdminMetadataManager").warn("a real warning");
            context.getLogger("org.apache.flink.client.cli.CliFrontend").info("Running 'run' command.");
            context.getLogger("io.onceflow.job.OnceflowJob").warn("parallelism overridden");
        });

        assertThat(log).doesNotContain("Rebootstrapping")
                .contains("a real warning", "Running 'run' command.", "parallelism overridden");
    }

    @ParameterizedTest
    @ValueSource(strings = {"flink-conf/log4j.properties", "flink-conf/log4j-console.properties",
            "src/test/resources/log4j2-test.properties"})
    void onlyTheKnownHarmlessCollisionsAreDropped(String file) {
        LoggerConfig metricGroups = loggerConfig(file, metricGroupLoggerName());

        assertThat(metricGroups.getName()).isEqualTo(metricGroupLoggerName());
        assertThat(List.of(
                collision("pendingCommittables", "onceflow, Output topic: Committer, 0"),
                collision("currentSendTime", "onceflow, Dead-letter topic: Writer, 1"),
                collision("records-consumed-rate", "onceflow, Source: Kafka source, 0, KafkaSourceReader, KafkaConsumer")))
                .allSatisfy(event -> assertThat(metricGroups.isFiltered(event)).as(event.getMessage().getFormattedMessage())
                        .isTrue());
        assertThat(metricGroups.isFiltered(collision("eventsAccepted", "onceflow, Ingest, 0"))).isFalse();
        assertThat(metricGroups.isFiltered(collision("records-consumed-rate", "onceflow, Source: Kafka source, 0")))
                .isFalse();
    }

    @ParameterizedTest
    @ValueSource(strings = {"flink-conf/log4j.properties", "flink-conf/log4j-console.properties",
            "src/test/resources/log4j2-test.properties"})
    void theKafkaWritersChangedPrefixWarningIsDroppedItsOtherLinesKept(String file) {
        String writer = "org.apache.flink.connector.kafka.sink.ExactlyOnceKafkaWriter";
        LoggerConfig kafkaWriter = loggerConfig(file, writer);

        assertThat(kafkaWriter.getName()).isEqualTo(writer);
        assertThat(kafkaWriter.isFiltered(Log4jLogEvent.newBuilder().setLoggerName(writer).setLevel(Level.WARN)
                .setMessage(new SimpleMessage("Transactional id prefix from previous execution p-dlq-g0123abcd has"
                        + " changed to p-dlq-g4567efgh.")).build())).isTrue();
        assertThat(kafkaWriter.isFiltered(Log4jLogEvent.newBuilder().setLoggerName(writer).setLevel(Level.WARN)
                .setMessage(new SimpleMessage("Producer p-dlq-g0123abcd-0-7 fenced while aborting")).build())).isFalse();
    }

    @Test
    void theCommandLineToolsLocalRunShowsTheJobsStatesAndTaskFailuresButNotEachTasksSteps() {
        String executionGraph = "org.apache.flink.runtime.executiongraph.ExecutionGraph";
        LoggerConfig jobStates = loggerConfig("bin/log4j-onceflow.properties", executionGraph);

        assertThat(jobStates.getName()).isEqualTo(executionGraph);
        assertThat(jobStates.isFiltered(info(executionGraph,
                "Source: Kafka source (1/2) (1a2b_0_0) switched from DEPLOYING to INITIALIZING."))).isTrue();
        assertThat(jobStates.isFiltered(info(executionGraph,
                "Sink: Output topic: Writer (2/2) (1a2b_3_0) switched from RUNNING to FINISHED."))).isTrue();
        assertThat(List.of(
                info(executionGraph, "Job onceflow: a -> b (5d1f) switched from state CREATED to RUNNING."),
                info(executionGraph, "Job onceflow: a -> b (5d1f) switched from state RUNNING to FAILING."),
                info(executionGraph, "Source: Kafka source (1/2) (1a2b_0_0) switched from RUNNING to FAILED on"
                        + " localhost:1 (dataPort=-1).")))
                .allSatisfy(event -> assertThat(jobStates.isFiltered(event)).as(event.getMessage().getFormattedMessage())
                        .isFalse());
    }

    private static LogEvent info(String logger, String message) {
        return Log4jLogEvent.newBuilder().setLoggerName(logger).setLevel(Level.INFO)
                .setMessage(new SimpleMessage(message)).build();
    }

    /** The configuration {@code file} gives {@code logger}, built as log4j builds it (its file appender in a temporary directory). */
    private LoggerConfig loggerConfig(String file, String logger) {
        String previous = System.getProperty("log.file");
        System.setProperty("log.file", directory.resolve("unused.log").toString());
        try {
            Configuration configuration = ConfigurationFactory.getInstance().getConfiguration(new LoggerContext(file),
                    ConfigurationSource.fromUri(Path.of(file).toUri()));
            configuration.initialize();
            return configuration.getLoggerConfig(logger);
        } finally {
            if (previous == null) {
                System.clearProperty("log.file");
            } else {
                System.setProperty("log.file", previous);
            }
        }
    }

    /** The warning Flink's AbstractMetricGroup logs for a second metric of the same name in a group. */
    private static LogEvent collision(String metric, String group) {
        return Log4jLogEvent.newBuilder().setLoggerName(metricGroupLoggerName()).setLevel(Level.WARN)
                .setMessage(new SimpleMessage("Name collision: Group already contains a Metric with the name '" + metric
                        + "'. Metric will not be reported.[localhost, taskmanager, tm-1, " + group + "]"))
                .build();
    }

    @Test
    void theClientLogNeverRecordsAProgramArgumentsValue() throws IOException {
        String log = logThrough("log4j-cli.properties", context -> {
            Logger cli = context.getLogger("org.apache.flink.client.cli.CliFrontend");
            // as EnvironmentInformation.logEnvironmentInfo logs them for "flink run job.jar ..."
            cli.info(" JVM Options:");
            cli.info("    -Dlog.file=/opt/flink/log/flink-client.log");
            cli.info(" Program Arguments:");
            cli.info("    run");
            cli.info("    /opt/onceflow/target/onceflow-job.jar");
            cli.info("    --input.topics");
            cli.info("    payments");
            cli.info("    ******** (sensitive information)");
            cli.info("    plain-Secret-after-a-hidden-key");
            cli.info("    --kafka.properties.aws.credentials.file=/secret/credentials");
            cli.info(" Classpath: /opt/flink/lib/flink-dist.jar");
        });

        assertThat(log).contains("-Dlog.file=/opt/flink/log/flink-client.log", "--input.topics", "Classpath:")
                .doesNotContain("plain-Secret-after-a-hidden-key", "payments", "/secret/credentials");
    }

    /** The logger Flink's metric groups warn through (not their own class's), read from Flink itself. */
    private static String metricGroupLoggerName() {
        try {
            Field log = AbstractMetricGroup.class.getDeclaredField("LOG");
            log.setAccessible(true);
            return ((org.slf4j.Logger) log.get(null)).getName();
        } catch (ReflectiveOperationException e) {
            throw new AssertionError("Flink's AbstractMetricGroup has no LOG field any more", e);
        }
    }

    private interface Logging {
        void to(LoggerContext context);
    }

    private String logThrough(String file, Logging logging) throws IOException {
        Path logFile = directory.resolve(file + ".log");
        String previous = System.getProperty("log.file");
        System.setProperty("log.file", logFile.toString());
        LoggerContext context = new LoggerContext(file);
        try {
            Configuration configuration = ConfigurationFactory.getInstance().getConfiguration(context,
                    ConfigurationSource.fromUri(FLINK_CONF.resolve(file).toUri()));
            context.start(configuration);
            logging.to(context);
        } finally {
            context.stop();
            if (previous == null) {
                System.clearProperty("log.file");
            } else {
                System.setProperty("log.file", previous);
            }
        }
        return Files.readString(logFile);
    }
}
