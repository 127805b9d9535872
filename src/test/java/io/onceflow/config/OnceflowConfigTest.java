package io.onceflow.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.InstanceOfAssertFactories.STRING;

import io.onceflow.ingest.JsonLimits;
import io.onceflow.sink.postgres.options.PostgresWriterOptions;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;

class OnceflowConfigTest {
    private static final Map<String, String> NO_ENVIRONMENT = Map.of();

    private static OnceflowConfig build(Map<String, String> settings) {
        return OnceflowConfig.fromMap(settings, NO_ENVIRONMENT);
    }

    private static Map<String, String> requiredWith(String key, String value) {
        Map<String, String> settings = ValidSettings.required();
        settings.put(key, value);
        return settings;
    }

    private static List<String> problemsOf(Map<String, String> settings) {
        return ConfigProblems.of(settings);
    }

    @Test
    void requiredSettingsAloneGiveTheDocumentedDefaults() {
        OnceflowConfig config = build(ValidSettings.required());

        assertThat(config.bootstrapServers()).isEqualTo("kafka-1:9092,kafka-2:9092");
        assertThat(config.inputTopics()).containsExactly("payments", "refunds");
        assertThat(config.groupId()).isEqualTo("onceflow-payments");
        assertThat(config.outputTopic()).isEqualTo("payments-deduplicated");
        assertThat(config.deadLetterTopic()).isEqualTo("payments-dead-letters");
        assertThat(config.transactionalIdPrefix()).isEqualTo("onceflow-payments");
        assertThat(config.kafkaClientProperties()).isEmpty();
        assertThat(config.startingOffsets()).isEqualTo(StartingOffsets.COMMITTED_OR_EARLIEST);
        assertThat(config.messageIdSourceSpec()).isEqualTo("header:message-id");
        assertThat(config.maxMessageBytes()).isEqualTo(1_048_576);
        assertThat(config.maxIdLength()).isEqualTo(256);
        assertThat(config.dedupTtl()).isEqualTo(Duration.ofDays(7));
        assertThat(config.processorClass()).isEmpty();
        assertThat(config.processorRetries())
                .isEqualTo(new ProcessorRetries(3, Duration.ofMillis(100), Duration.ofSeconds(10)));
        assertThat(config.kafkaTransactionTimeout()).isEqualTo(Duration.ofMinutes(15));
        assertThat(config.brokerTransactionMaxTimeout()).isEqualTo(Duration.ofMinutes(15));
        assertThat(config.checkpointInterval()).isEqualTo(Duration.ofSeconds(10));
        assertThat(config.checkpointTimeout()).isEqualTo(Duration.ofMinutes(2));
        assertThat(config.checkpointMinPause()).isEqualTo(Duration.ZERO);
        assertThat(config.restartBudget()).isEqualTo(Duration.ofMinutes(7));
        assertThat(config.checkpointDir()).isEmpty();
        assertThat(config.parallelism()).isEmpty();
        assertThat(config.deliveryGuarantee()).isEqualTo(DeliveryGuarantee.EXACTLY_ONCE);
        assertThat(config.stateBackend()).isEqualTo(StateBackendKind.ROCKSDB);
        assertThat(config.postgres()).isEmpty();
    }

    @Test
    void everyOptionalSettingIsRead() {
        Map<String, String> settings = ValidSettings.required();
        settings.put("input.starting.offsets", "latest");
        settings.put("message.id.source", "json:/payment/id");
        settings.put("message.max.bytes", "2048");
        settings.put("message.id.max.length", "64");
        settings.put("dedup.ttl", "2h");
        settings.put("processor.class", "com.example.payments.PaymentProcessor");
        settings.put("processor.max.attempts", "5");
        settings.put("processor.retry.backoff", "20ms");
        settings.put("processor.retry.backoff.max", "1s");
        settings.put("kafka.transaction.timeout", "PT20M");
        settings.put("kafka.transaction.timeout.broker.max", "1h");
        settings.put("checkpoint.interval", "500ms");
        settings.put("checkpoint.timeout", "1m");
        settings.put("checkpoint.min.pause", "5s");
        settings.put("restart.budget", "3min");
        settings.put("checkpoint.dir", "s3://bucket/onceflow");
        settings.put("parallelism", "4");
        settings.put("delivery.guarantee", "at-least-once");
        settings.put("state.backend", "hashmap");

        OnceflowConfig config = build(settings);

        assertThat(config.startingOffsets()).isEqualTo(StartingOffsets.LATEST);
        assertThat(config.messageIdSourceSpec()).isEqualTo("json:/payment/id");
        assertThat(config.maxMessageBytes()).isEqualTo(2048);
        assertThat(config.maxIdLength()).isEqualTo(64);
        assertThat(config.dedupTtl()).isEqualTo(Duration.ofHours(2));
        assertThat(config.processorClass()).contains("com.example.payments.PaymentProcessor");
        assertThat(config.processorRetries())
                .isEqualTo(new ProcessorRetries(5, Duration.ofMillis(20), Duration.ofSeconds(1)));
        assertThat(config.kafkaTransactionTimeout()).isEqualTo(Duration.ofMinutes(20));
        assertThat(config.brokerTransactionMaxTimeout()).isEqualTo(Duration.ofHours(1));
        assertThat(config.checkpointInterval()).isEqualTo(Duration.ofMillis(500));
        assertThat(config.checkpointTimeout()).isEqualTo(Duration.ofMinutes(1));
        assertThat(config.checkpointMinPause()).isEqualTo(Duration.ofSeconds(5));
        assertThat(config.restartBudget()).isEqualTo(Duration.ofMinutes(3));
        assertThat(config.checkpointDir()).contains("s3://bucket/onceflow");
        assertThat(config.parallelism()).hasValue(4);
        assertThat(config.deliveryGuarantee()).isEqualTo(DeliveryGuarantee.AT_LEAST_ONCE);
        assertThat(config.stateBackend()).isEqualTo(StateBackendKind.HASHMAP);
    }

    @Test
    void valuesAreTrimmedAndAnEmptyValueCountsAsNotSet() {
        Map<String, String> settings = requiredWith("input.topics", "  payments , refunds ");
        settings.put("parallelism", "  ");
        settings.put("dedup.ttl", "");

        OnceflowConfig config = build(settings);

        assertThat(config.inputTopics()).containsExactly("payments", "refunds");
        assertThat(config.parallelism()).isEmpty();
        assertThat(config.dedupTtl()).isEqualTo(Duration.ofDays(7));
    }

    static Stream<String> requiredKeys() {
        return ValidSettings.required().keySet().stream().sorted();
    }

    @ParameterizedTest
    @MethodSource("requiredKeys")
    void eachMissingRequiredKeyIsReported(String key) {
        Map<String, String> settings = ValidSettings.required();
        settings.remove(key);

        assertThat(problemsOf(settings))
                .singleElement(STRING)
                .startsWith(key + ": is required but not set. Set it: ");
    }

    @Test
    void missingTransactionalIdPrefixExplainsStabilityAndUniqueness() {
        Map<String, String> settings = ValidSettings.required();
        settings.remove("kafka.transactional.id.prefix");

        assertThat(problemsOf(settings).get(0))
                .contains("same across restarts")
                .contains("unique among jobs");
    }

    static Stream<Arguments> invalidValues() {
        return Stream.of(
                Arguments.of("kafka.bootstrap.servers", "kafka-1", "'kafka-1' is not of the form host:port"),
                Arguments.of("kafka.bootstrap.servers", "kafka-1:0", "'kafka-1:0' is not of the form host:port"),
                Arguments.of("kafka.bootstrap.servers", "kafka-1:9092,,kafka-2:9092", "has an empty element"),
                Arguments.of("input.topics", "payments,bad topic", "'bad topic' is not a valid Kafka topic name"),
                Arguments.of("input.topics", "payments,", "has an empty element"),
                Arguments.of("input.topics", "payments,payments", "lists the topic 'payments' twice"),
                Arguments.of("input.topics", "a".repeat(250), "is not a valid Kafka topic name"),
                Arguments.of("input.topics", "..", "'..' is not a valid Kafka topic name"),
                Arguments.of("input.starting.offsets", "newest", "'newest' is not one of committed-or-earliest, committed-or-latest, earliest, latest"),
                Arguments.of("message.id.source", "header:", "'header:' is not a message id source"),
                Arguments.of("message.id.source", "json:id", "'json:id' is not a message id source"),
                Arguments.of("message.id.source", "json:/a~2b", "'json:/a~2b' is not a message id source"),
                Arguments.of("message.id.source", "value", "'value' is not a message id source"),
                Arguments.of("message.max.bytes", "0", "'0' is not a whole number from 1 to 104857600"),
                Arguments.of("message.max.bytes", "104857601", "is not a whole number from 1 to 104857600"),
                Arguments.of("message.max.bytes", "1MB", "'1MB' is not a whole number"),
                Arguments.of("message.id.max.length", "4097", "is not a whole number from 1 to 4096"),
                Arguments.of("dedup.ttl", "0s", "'0s' is less than 1ms"),
                Arguments.of("dedup.ttl", "7 days", "'7 days' is not a duration"),
                Arguments.of("processor.max.attempts", "0", "'0' is not a whole number from 1 to 100"),
                Arguments.of("processor.max.attempts", "101", "is not a whole number from 1 to 100"),
                Arguments.of("processor.retry.backoff", "0ms", "'0ms' is less than 1ms"),
                Arguments.of("processor.retry.backoff", "fast", "'fast' is not a duration"),
                Arguments.of("processor.retry.backoff.max", "50ms", "50ms is shorter than processor.retry.backoff (100ms)"),
                Arguments.of("processor.retry.backoff.max", "2min", "2min is not shorter than checkpoint.timeout (2min)"),
                Arguments.of("processor.max.attempts", "20", "the pauses between 20 attempts at a failing event add up to"),
                Arguments.of("output.topic", "out/put", "'out/put' is not a valid Kafka topic name"),
                Arguments.of("dead.letter.topic", "dead letters", "'dead letters' is not a valid Kafka topic name"),
                Arguments.of("kafka.transactional.id.prefix", "job 1", "'job 1' is not a valid transactional id prefix"),
                Arguments.of("kafka.transactional.id.prefix", "p".repeat(101), "is not a valid transactional id prefix"),
                Arguments.of("kafka.transaction.timeout", "-PT1M", "'-PT1M' is less than 1ms"),
                Arguments.of("kafka.transaction.timeout.broker.max", "forever", "'forever' is not a duration"),
                Arguments.of("checkpoint.interval", "5ms", "'5ms' is less than 10ms"),
                Arguments.of("checkpoint.timeout", "0ms", "'0ms' is less than 10ms"),
                Arguments.of("checkpoint.min.pause", "-PT1S", "'-PT1S' is less than 0ms"),
                Arguments.of("restart.budget", "0ms", "'0ms' is less than 1ms"),
                Arguments.of("checkpoint.dir", "/var/checkpoints", "'/var/checkpoints' is not a URI with a scheme"),
                Arguments.of("checkpoint.dir", "s3://bucket", "'s3://bucket' has no directory path"),
                Arguments.of("parallelism", "0", "'0' is not a whole number from 1 to 32768"),
                Arguments.of("parallelism", "32769", "is not a whole number from 1 to 32768"),
                Arguments.of("delivery.guarantee", "none", "'none' is not one of exactly-once, at-least-once"),
                Arguments.of("state.backend", "memory", "'memory' is not one of rocksdb, hashmap"));
    }

    @ParameterizedTest(name = "{0}={1}")
    @MethodSource("invalidValues")
    void eachInvalidValueIsReportedWithItsKey(String key, String value, String whatIsWrong) {
        assertThat(problemsOf(requiredWith(key, value)))
                .singleElement(STRING)
                .startsWith(key + ": ")
                .contains(whatIsWrong)
                // <what is wrong>. <what to do>.
                .matches(".+\\. [A-Z].+\\.");
    }

    @Test
    void thePausesOfAFailingEventMustEndBeforeItsCheckpointTimesOut() {
        Map<String, String> settings = requiredWith("processor.max.attempts", "10");
        settings.put("processor.retry.backoff", "1s");
        settings.put("processor.retry.backoff.max", "15s");

        // 1 + 2 + 4 + 8 + 15 x 5 = 90 s
        assertThat(build(settings).processorRetries().pausesOfAFailingEvent()).isEqualTo(Duration.ofSeconds(90));
        settings.put("checkpoint.timeout", "90s");
        assertThat(problemsOf(settings)).containsExactly("processor.max.attempts: the pauses between 10 attempts at a"
                + " failing event add up to 90s, not shorter than checkpoint.timeout (90s), and a checkpoint waits for"
                + " them. Lower it, processor.retry.backoff or processor.retry.backoff.max, or raise checkpoint.timeout.");
    }

    @Test
    void outputAndDeadLetterTopicsMustDiffer() {
        assertThat(problemsOf(requiredWith("dead.letter.topic", "payments-deduplicated")))
                .containsExactly(
                        "dead.letter.topic: is the same topic as output.topic. Give dead letters"
                                + " their own topic.");
    }

    @Test
    void outputAndDeadLetterTopicsMustNotBeInputTopics() {
        Map<String, String> settings = requiredWith("output.topic", "refunds");
        settings.put("dead.letter.topic", "payments");

        assertThat(problemsOf(settings))
                .containsExactly(
                        "output.topic: 'refunds' is also in input.topics. Use a topic the job does"
                                + " not read, or it would consume its own output.",
                        "dead.letter.topic: 'payments' is also in input.topics. Use a topic the job"
                                + " does not read, or it would consume its own output.");
    }

    @Test
    void transactionTimeoutAboveTheBrokerMaximumIsRejected() {
        assertThat(problemsOf(requiredWith("kafka.transaction.timeout", "16min")))
                .singleElement(STRING)
                .startsWith("kafka.transaction.timeout: 16min exceeds the brokers'")
                .contains("kafka.transaction.timeout.broker.max = 15min");
    }

    @Test
    void transactionTimeoutAboveFifteenMinutesIsAcceptedOnceTheBrokerMaximumIsRaised() {
        Map<String, String> settings = requiredWith("kafka.transaction.timeout", "1h");
        settings.put("kafka.transaction.timeout.broker.max", "1h");

        assertThat(build(settings).kafkaTransactionTimeout()).isEqualTo(Duration.ofHours(1));
    }

    private static final String LONGEST_TRANSACTION = "the longest a checkpoint's transaction can stay open,"
            + " (checkpoint.tolerable.failures + 1) x max(checkpoint.interval, checkpoint.timeout + checkpoint.min.pause)"
            + " + checkpoint.timeout + restart.budget = ";

    @Test
    void transactionTimeoutMustOutliveTwoCheckpointsAndARestart() {
        // The defaults: checkpoint K may take the whole timeout, the next one starts only after it
        // and may take the whole timeout too, and a failure just before the commit adds a restart.
        Map<String, String> settings = requiredWith("kafka.transaction.timeout", "11min");

        assertThat(problemsOf(settings))
                .singleElement(STRING)
                .isEqualTo("kafka.transaction.timeout: 11min is not longer than " + LONGEST_TRANSACTION
                        + "(0 + 1) x max(10s, 2min + 0ms) + 2min + 7min = 11min, assuming that a restart (noticing a"
                        + " lost TaskManager, the restart delay, the wait for slots) takes at most restart.budget = 7min."
                        + " Raise it (the brokers' transaction.max.timeout.ms and kafka.transaction.timeout.broker.max"
                        + " with it), or lower checkpoint.tolerable.failures, checkpoint.timeout, checkpoint.min.pause"
                        + " or checkpoint.interval; set restart.budget to your cluster's heartbeat.timeout + longest"
                        + " restart delay + slot.request.timeout if they are not flink-conf/config.yaml's: a"
                        + " transaction must outlive its checkpoint plus a restart, or the broker aborts a"
                        + " pre-committed transaction and its records are lost.");
        settings.put("kafka.transaction.timeout", "660001ms");
        assertThat(build(settings).kafkaTransactionTimeout()).isEqualTo(Duration.ofMillis(660_001));
    }

    @Test
    void transactionTimeoutThatLeavesNoRoomForARestartIsRefused() {
        // Outlives (tolerable failures + 1) x (interval + timeout) = 11min, as the check used to
        // require, but a checkpoint completing just before a failure is aborted by the broker if
        // the restart takes more than a minute.
        Map<String, String> settings = requiredWith("kafka.transaction.timeout", "12min");
        settings.put("checkpoint.interval", "10min");
        settings.put("checkpoint.timeout", "1min");

        assertThat(problemsOf(settings))
                .singleElement(STRING)
                .startsWith("kafka.transaction.timeout: 12min is not longer than " + LONGEST_TRANSACTION
                        + "(0 + 1) x max(10min, 1min + 0ms) + 1min + 7min = 18min, assuming that a restart"
                        + " (noticing a lost TaskManager, the restart delay, the wait for slots) takes at most"
                        + " restart.budget = 7min.")
                .contains("set restart.budget to your cluster's heartbeat.timeout");

        // a cluster that restarts within 50 s (no slot wait: spare TaskManagers) leaves room
        settings.put("restart.budget", "50s");
        assertThat(build(settings).restartBudget()).isEqualTo(Duration.ofSeconds(50));
    }

    @Test
    void transactionTimeoutMustOutliveTheMinimumPauseBeforeTheNextCheckpoint() {
        Map<String, String> settings = requiredWith("kafka.transaction.timeout", "12min");
        settings.put("checkpoint.min.pause", "1min");

        assertThat(problemsOf(settings))
                .singleElement(STRING)
                .startsWith("kafka.transaction.timeout: 12min is not longer than " + LONGEST_TRANSACTION
                        + "(0 + 1) x max(10s, 2min + 1min) + 2min + 7min = 12min,");
    }

    @Test
    void transactionTimeoutMustOutliveEveryToleratedFailedCheckpoint() {
        // Each tolerated failure keeps the transaction open for another checkpoint.
        Map<String, String> settings = requiredWith("kafka.transaction.timeout", "15min");
        settings.put("checkpoint.tolerable.failures", "2");

        assertThat(problemsOf(settings))
                .singleElement(STRING)
                .startsWith("kafka.transaction.timeout: 15min is not longer than " + LONGEST_TRANSACTION
                        + "(2 + 1) x max(10s, 2min + 0ms) + 2min + 7min = 15min,");
        settings.put("kafka.transaction.timeout", "16min");
        settings.put("kafka.transaction.timeout.broker.max", "16min");
        assertThat(build(settings).tolerableCheckpointFailures()).isEqualTo(2);
    }

    @Test
    void freshStartPendingIsRefuseOrDiscard() {
        assertThat(build(ValidSettings.required()).pendingWorkOnFreshStart()).isEqualTo(PendingWorkOnFreshStart.REFUSE);
        assertThat(build(requiredWith("fresh.start.pending", "discard")).pendingWorkOnFreshStart())
                .isEqualTo(PendingWorkOnFreshStart.DISCARD);
        assertThat(problemsOf(requiredWith("fresh.start.pending", "drop")))
                .singleElement(STRING)
                .startsWith("fresh.start.pending: ");
    }

    @Test
    void allProblemsAreReportedTogetherInOneException() {
        Map<String, String> settings = ValidSettings.required();
        settings.remove("input.topics");
        settings.remove("input.group.id");
        settings.put("dedup.ttl", "soon");
        settings.put("parallelism", "-1");
        settings.put("dead.letter.topic", "payments-deduplicated");
        settings.put("kafka.bootstrap.server", "kafka:9092");

        assertThatThrownBy(() -> build(settings))
                .isInstanceOf(ConfigException.class)
                .isInstanceOf(IllegalArgumentException.class)
                .satisfies(
                        thrown -> {
                            ConfigException e = (ConfigException) thrown;
                            assertThat(e.problems())
                                    .hasSize(6)
                                    .anyMatch(p -> p.startsWith("input.topics: is required"))
                                    .anyMatch(p -> p.startsWith("input.group.id: is required"))
                                    .anyMatch(p -> p.startsWith("dedup.ttl: 'soon'"))
                                    .anyMatch(p -> p.startsWith("parallelism: '-1'"))
                                    .anyMatch(p -> p.startsWith("dead.letter.topic: is the same"))
                                    .anyMatch(p -> p.startsWith("kafka.bootstrap.server: unknown"));
                            assertThat(e.getMessage())
                                    .isEqualTo(
                                            "Invalid onceflow configuration (6 problems):\n  "
                                                    + String.join("\n  ", e.problems()));
                        });
    }

    @Test
    void unknownKeyCloseToAKnownOneGetsASuggestion() {
        assertThat(problemsOf(requiredWith("checkpoint.intervall", "10s")))
                .containsExactly(
                        "checkpoint.intervall: unknown key 'checkpoint.intervall'; did you mean"
                                + " 'checkpoint.interval'? Rename it.");
    }

    @Test
    void unknownKeyThatIsTheEndOfAKnownOneGetsASuggestion() {
        assertThat(problemsOf(requiredWith("group.id", "x")))
                .singleElement(STRING)
                .contains("did you mean 'input.group.id'?");
    }

    @Test
    void unknownKeyFarFromEveryKnownOneIsReportedWithoutSuggestion() {
        assertThat(problemsOf(requiredWith("security.protocol", "SSL")))
                .singleElement(STRING)
                .startsWith("security.protocol: unknown key 'security.protocol'. ")
                .doesNotContain("did you mean")
                .contains("kafka.properties.");
    }

    @Test
    void kafkaClientPropertiesArePassedThroughWithoutThePrefix() {
        Map<String, String> settings = requiredWith("kafka.properties.security.protocol", "SASL_SSL");
        settings.put("kafka.properties.sasl.mechanism", "SCRAM-SHA-512");
        settings.put("kafka.properties.some.future.setting", "x");

        OnceflowConfig config = build(settings);

        assertThat(config.kafkaClientProperties())
                .containsOnly(
                        Map.entry("security.protocol", "SASL_SSL"),
                        Map.entry("sasl.mechanism", "SCRAM-SHA-512"),
                        Map.entry("some.future.setting", "x"));
    }

    @Test
    void kafkaClientPropertiesAreADefensiveCopy() {
        OnceflowConfig config =
                build(requiredWith("kafka.properties.security.protocol", "SASL_SSL"));

        config.kafkaClientProperties().setProperty("security.protocol", "PLAINTEXT");

        assertThat(config.kafkaClientProperties())
                .containsEntry("security.protocol", "SASL_SSL");
    }

    @Test
    void inputTopicsCannotBeModified() {
        List<String> topics = build(ValidSettings.required()).inputTopics();

        assertThatThrownBy(() -> topics.add("other"))
                .isInstanceOf(UnsupportedOperationException.class);
    }

    static Stream<Arguments> controlledKafkaProperties() {
        return Stream.of(
                Arguments.of("bootstrap.servers", "Set kafka.bootstrap.servers instead."),
                Arguments.of("group.id", "Set input.group.id instead."),
                Arguments.of("transactional.id", "Set kafka.transactional.id.prefix instead."),
                Arguments.of("transaction.timeout.ms", "Set kafka.transaction.timeout instead."),
                Arguments.of("auto.offset.reset", "Set input.starting.offsets instead."),
                Arguments.of("enable.auto.commit", "offsets live in Flink checkpoints"),
                Arguments.of("isolation.level", "read_committed"));
    }

    @ParameterizedTest
    @MethodSource("controlledKafkaProperties")
    void kafkaClientPropertiesThatOnceflowControlsAreRejected(String name, String explanation) {
        assertThat(problemsOf(requiredWith("kafka.properties." + name, "x")))
                .singleElement(STRING)
                .startsWith("kafka.properties." + name + ": ")
                .contains(explanation);
    }

    @Test
    void kafkaPropertiesPrefixWithoutANameIsAnUnknownKey() {
        assertThat(problemsOf(requiredWith("kafka.properties.", "x")))
                .singleElement(STRING)
                .startsWith("kafka.properties.: unknown key");
    }

    @Test
    void postgresDefaults() {
        PostgresSettings postgres = build(ValidSettings.withPostgres("pw")).postgres().orElseThrow();

        assertThat(postgres.url()).isEqualTo("jdbc:postgresql://db:5432/payments");
        assertThat(postgres.user()).isEqualTo("onceflow");
        assertThat(postgres.password()).isEqualTo("pw");
        assertThat(postgres.table()).isEqualTo("onceflow_events");
        assertThat(postgres.rejectsTable()).isEqualTo("onceflow_rejects");
        assertThat(postgres.commitLogTable()).isEqualTo("onceflow_commit_log");
        assertThat(postgres.runsTable()).isEqualTo("onceflow_runs");
        assertThat(postgres.writersTable()).isEqualTo("onceflow_writers");
        assertThat(postgres.batchSize()).isEqualTo(1000);
        assertThat(postgres.effectFunction()).isEmpty();
    }

    /**
     * onceflow 0.1 derived the prefix from the Kafka one, so orders-eu, orders.eu and orders_eu
     * collided and one job's fresh start rolled back another's transactions. It is required now,
     * and the message tells an existing job which prefix it ran with.
     */
    @ParameterizedTest
    @ValueSource(strings = {"orders-eu", "orders.eu", "orders_eu"})
    void postgresSinkPrefixIsRequiredAndNamesWhatOnceflow01Derived(String kafkaPrefix) {
        Map<String, String> settings = ValidSettings.withPostgres("pw");
        settings.remove("postgres.sink.prefix");
        settings.put("kafka.transactional.id.prefix", kafkaPrefix);

        assertThat(problemsOf(settings))
                .singleElement(STRING)
                .startsWith("postgres.sink.prefix: is required when postgres.url is set.")
                .contains("unique among the jobs using this database")
                .endsWith("must keep what it derived: postgres.sink.prefix=orders_eu.");
    }

    @Test
    void postgresSettingsAreRead() {
        Map<String, String> settings = ValidSettings.withPostgres("pw");
        settings.put("postgres.table", "billing.events");
        settings.put("postgres.commit.log.table", "billing.commit_log");
        settings.put("postgres.sink.prefix", "payments_1");
        settings.put("postgres.batch.size", "50");
        settings.put("postgres.effect.function", "ledger.apply_payment");

        PostgresSettings postgres = build(settings).postgres().orElseThrow();

        assertThat(postgres.table()).isEqualTo("billing.events");
        assertThat(postgres.commitLogTable()).isEqualTo("billing.commit_log");
        assertThat(postgres.sinkPrefix()).isEqualTo("payments_1");
        assertThat(postgres.batchSize()).isEqualTo(50);
        assertThat(postgres.effectFunction()).contains("ledger.apply_payment");
        assertThat(postgres.tables().allowTriggersThatMayStallCheckpoints()).as("refused by default").isFalse();

        settings.put("postgres.allow.triggers.that.may.stall.checkpoints", "true");
        assertThat(build(settings).postgres().orElseThrow().tables().allowTriggersThatMayStallCheckpoints()).isTrue();
    }

    @Test
    void postgresTimeoutsAreReadIntoTheWriterOptionsAndDefaultToTheirOldFixedValues() {
        Map<String, String> settings = ValidSettings.withPostgres("pw");
        assertThat(build(settings).postgres().orElseThrow().writer())
                .isEqualTo(PostgresWriterOptions.defaults())
                .extracting(PostgresWriterOptions::lockTimeout, PostgresWriterOptions::statementTimeout)
                .containsExactly(Duration.ofSeconds(30), Duration.ofMinutes(2));

        settings.put("postgres.lock.timeout", "5s");
        settings.put("postgres.statement.timeout", "10min");
        PostgresWriterOptions writer = build(settings).postgres().orElseThrow().writer();

        assertThat(writer.lockTimeout()).isEqualTo(Duration.ofSeconds(5));
        assertThat(writer.statementTimeout()).isEqualTo(Duration.ofMinutes(10));
        assertThat(writer.sessionSettings()).containsExactly(
                Map.entry("lock_timeout", "5000"), Map.entry("statement_timeout", "600000"));
    }

    @Test
    void theJsonParsersLimitsAreSettingsWithJacksonsDefaults() {
        assertThat(build(ValidSettings.required()).jsonLimits()).isEqualTo(JsonLimits.DEFAULTS);

        Map<String, String> settings = requiredWith("json.max.nesting.depth", "2000");
        settings.put("json.max.number.length", "5000");
        assertThat(build(settings).jsonLimits())
                .isEqualTo(new JsonLimits(2000, 5000, JsonLimits.DEFAULTS.maxNameLength(),
                        JsonLimits.DEFAULTS.maxStringLength()));
        assertThat(problemsOf(requiredWith("json.max.name.length", "0")))
                .singleElement(STRING)
                .startsWith("json.max.name.length: ");
    }

    @Test
    void postgresPasswordMayBeLeftOut() {
        Map<String, String> settings = ValidSettings.withPostgres("");

        assertThat(build(settings).postgres().orElseThrow().password()).isEmpty();
    }

    @Test
    void postgresUserIsRequiredWithAUrl() {
        Map<String, String> settings = ValidSettings.withPostgres("pw");
        settings.remove("postgres.user");

        assertThat(problemsOf(settings))
                .singleElement(STRING)
                .startsWith("postgres.user: is required but not set.");
    }

    @Test
    void postgresKeysWithoutAUrlAreReported() {
        Map<String, String> settings = requiredWith("postgres.user", "onceflow");
        settings.put("postgres.table", "events");

        assertThat(problemsOf(settings))
                .containsExactly(
                        "postgres.user: is set but postgres.url is not. Set postgres.url to enable"
                                + " the PostgreSQL sink, or remove postgres.user.",
                        "postgres.table: is set but postgres.url is not. Set postgres.url to enable"
                                + " the PostgreSQL sink, or remove postgres.table.");
    }

    static Stream<Arguments> invalidPostgresValues() {
        return Stream.of(
                Arguments.of("postgres.url", "jdbc:mysql://db/payments", "is not a PostgreSQL JDBC URL (it does not start with jdbc:postgresql:"),
                Arguments.of("postgres.table", "events; drop table x", "'events; drop table x' is not a valid table name"),
                Arguments.of("postgres.commit.log.table", "a.b.c", "'a.b.c' is not a valid table name"),
                Arguments.of("postgres.sink.prefix", "payments-1", "'payments-1' is not a valid sink prefix"),
                Arguments.of("postgres.sink.prefix", "p".repeat(41), "is not a valid sink prefix"),
                Arguments.of("postgres.batch.size", "100001", "is not a whole number from 1 to 100000"),
                Arguments.of("postgres.lock.timeout", "0ms", "is less than 1ms"),
                Arguments.of("postgres.lock.timeout", "25d", "'25d' is more than"),
                Arguments.of("postgres.statement.timeout", "soon", "soon"),
                Arguments.of("postgres.allow.triggers.that.may.stall.checkpoints", "yes", "'yes' is not one of false, true"),
                Arguments.of("postgres.statement.timeout", "25d", "'25d' is more than"),
                Arguments.of("postgres.effect.function", "ledger.apply_payment(text, jsonb)",
                        "'ledger.apply_payment(text, jsonb)' is not a valid function name. Use only letters"));
    }

    @ParameterizedTest(name = "{0}={1}")
    @MethodSource("invalidPostgresValues")
    void eachInvalidPostgresValueIsReported(String key, String value, String whatIsWrong) {
        Map<String, String> settings = ValidSettings.withPostgres("pw");
        settings.put(key, value);

        assertThat(problemsOf(settings))
                .singleElement(STRING)
                .startsWith(key + ": ")
                .contains(whatIsWrong);
    }

    @Test
    void tableNameProblemSaysWhichCharactersAreAllowed() {
        Map<String, String> settings = ValidSettings.withPostgres("pw");
        settings.put("postgres.table", "events\"; DROP TABLE x; --");

        assertThat(problemsOf(settings))
                .singleElement(STRING)
                .contains("Use only letters a-z and A-Z, digits and '_'");
    }

    @Test
    void commitLogTableMustDifferFromTheEventsTable() {
        Map<String, String> settings = ValidSettings.withPostgres("pw");
        settings.put("postgres.table", "Events");
        settings.put("postgres.commit.log.table", "events");

        assertThat(problemsOf(settings))
                .containsExactly(
                        "postgres.commit.log.table: names a table that another postgres.*table key names too."
                                + " Give each of the sink's tables its own name.");
    }

    @ParameterizedTest
    @ValueSource(
            strings = {
                "jdbc:postgresql://db/payments?password=hunter2",
                "jdbc:postgresql://db/payments?user=x&PASSWORD=hunter2"
            })
    void postgresUrlWithAPasswordIsRejectedWithoutShowingIt(String url) {
        Map<String, String> settings = ValidSettings.withPostgres("pw");
        settings.put("postgres.url", url);

        assertThat(problemsOf(settings))
                .singleElement(STRING)
                .startsWith("postgres.url: contains a password.")
                .doesNotContain("hunter2");
    }

    @Test
    void usageListsEveryKeyWithItsDefault() {
        String usage = OnceflowConfig.usage();

        for (ConfigKey key : ConfigKey.values()) {
            assertThat(usage).contains("  " + key.key() + " (").contains(key.description());
        }
        assertThat(usage)
                .contains("kafka.bootstrap.servers (required)")
                .contains("dedup.ttl (default: 7d)")
                .contains("checkpoint.dir (optional)")
                .contains("kafka.properties.<name>")
                .contains("--config FILE");
    }
}
