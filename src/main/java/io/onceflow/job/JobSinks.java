package io.onceflow.job;

import io.onceflow.api.Event;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.config.PostgresSettings;
import io.onceflow.sink.kafka.KafkaSinks;
import io.onceflow.sink.kafka.KafkaWriterGate;
import io.onceflow.sink.postgres.internal.PostgresSchema;
import io.onceflow.sink.postgres.options.EffectResultsTopic;
import io.onceflow.sink.postgres.PostgresSink;
import io.onceflow.sink.postgres.PostgresSinkBuilder;
import io.onceflow.sink.postgres.options.PostgresTableOptions;
import java.time.Duration;
import java.util.Optional;
import java.util.Properties;
import org.apache.flink.annotation.Internal;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.kafka.clients.CommonClientConfigs;

/**
 * The sinks of a job, made from its settings alone: the two Kafka sinks, and the PostgreSQL sink
 * when {@code postgres.url} is set. {@link JobStart} starts the PostgreSQL sink's run and then
 * {@link #assemble}s them.
 */
@Internal
public final class JobSinks {
    private final OnceflowConfig config;
    private final Duration kafkaTransactionTimeout;

    /**
     * The sinks {@code config} describes, without the brokers' word on the Kafka transaction timeout:
     * {@link OnceflowConfig#kafkaTransactionTimeout()}.
     */
    public JobSinks(OnceflowConfig config) {
        this(config, config.kafkaTransactionTimeout());
    }

    /**
     * The sinks {@code config} describes, with the Kafka transaction timeout the start check decided
     * ({@link io.onceflow.preflight.Preflight.Result#kafkaTransactionTimeout()}).
     */
    public JobSinks(OnceflowConfig config, Duration kafkaTransactionTimeout) {
        this.config = config;
        this.kafkaTransactionTimeout = kafkaTransactionTimeout;
    }

    /** Tells whether the configuration asks for a PostgreSQL sink, written exactly-once. */
    boolean postgresExactlyOnce() {
        return config.postgres().isPresent() && config.deliveryGuarantee() == DeliveryGuarantee.EXACTLY_ONCE;
    }

    /** Tells whether the configuration asks for a PostgreSQL sink, written at-least-once. */
    boolean postgresAtLeastOnce() {
        return config.postgres().isPresent() && config.deliveryGuarantee() == DeliveryGuarantee.AT_LEAST_ONCE;
    }

    /**
     * The configured sinks: the two Kafka sinks, and the PostgreSQL sink when {@code postgres.url}
     * is set.
     *
     * @param startedPostgres the exactly-once PostgreSQL sink after {@link io.onceflow.sink.postgres.PostgresRunRegistry#startRun};
     *     required when the configuration asks for one, ignored for at-least-once
     */
    public OnceflowPipeline.Sinks assemble(Optional<PostgresSink> startedPostgres) {
        // A replaced job's restart must stop before its Kafka writers fence the newer job's producers.
        KafkaWriterGate writerGate = startedPostgres.isPresent() && postgresExactlyOnce()
                ? startedPostgres.get()::requireCurrentRun : KafkaWriterGate.OPEN;
        KafkaSinks kafka = new KafkaSinks(
                config.bootstrapServers(),
                config.kafkaClientProperties(),
                config.deliveryGuarantee(),
                config.transactionalIdPrefix(),
                kafkaTransactionTimeout,
                writerGate);
        Optional<Sink<Event>> postgres = config.postgres().map(settings ->
                config.deliveryGuarantee() == DeliveryGuarantee.EXACTLY_ONCE
                        ? startedPostgres.orElseThrow(() -> new IllegalStateException(
                                "the exactly-once PostgreSQL sink must be started (PostgresRunRegistry.startRun) first"))
                        : postgres().buildAtLeastOnce());
        return new OnceflowPipeline.Sinks(
                kafka.output(config.outputTopic()), kafka.deadLetters(config.deadLetterTopic()), postgres);
    }

    /** A builder with the configured PostgreSQL settings; call only when {@code postgres.url} is set. */
    PostgresSinkBuilder postgres() {
        PostgresSettings settings = config.postgres().orElseThrow();
        return PostgresSink.builder()
                .setConnection(settings.connection())
                .setTables(settings.tables())
                .setWriterOptions(settings.writer())
                .setSinkPrefix(settings.sinkPrefix())
                .setTolerableCheckpointFailures(config.tolerableCheckpointFailures())
                .setEffectResults(settings.effectResultsTopic().map(topic -> {
                    Properties kafka = config.kafkaClientProperties();
                    kafka.setProperty(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, config.bootstrapServers());
                    return new EffectResultsTopic(topic, kafka);
                }).orElse(null));
    }

    /** The PostgreSQL sink's tables, as configured. */
    public static PostgresSchema postgresSchema(PostgresTableOptions tables) {
        return new PostgresSchema(tables);
    }
}
