package io.onceflow.config;

import static io.onceflow.config.ConfigKey.ACCEPT_LOSS_AFTER_SHORT_OUTAGE;
import static io.onceflow.config.ConfigKey.BOOTSTRAP_SERVERS;
import static io.onceflow.config.ConfigKey.BROKER_TRANSACTION_MAX_TIMEOUT;
import static io.onceflow.config.ConfigKey.CHECKPOINT_DIR;
import static io.onceflow.config.ConfigKey.CHECKPOINT_INTERVAL;
import static io.onceflow.config.ConfigKey.CHECKPOINT_MIN_PAUSE;
import static io.onceflow.config.ConfigKey.CHECKPOINT_TIMEOUT;
import static io.onceflow.config.ConfigKey.CHECKPOINT_TOLERABLE_FAILURES;
import static io.onceflow.config.ConfigKey.DEAD_LETTER_TOPIC;
import static io.onceflow.config.ConfigKey.DEDUP_TTL;
import static io.onceflow.config.ConfigKey.DELIVERY_GUARANTEE;
import static io.onceflow.config.ConfigKey.FRESH_START_PENDING;
import static io.onceflow.config.ConfigKey.INPUT_GROUP_ID;
import static io.onceflow.config.ConfigKey.INPUT_STARTING_OFFSETS;
import static io.onceflow.config.ConfigKey.INPUT_TOPICS;
import static io.onceflow.config.ConfigKey.JSON_MAX_NAME_LENGTH;
import static io.onceflow.config.ConfigKey.JSON_MAX_NESTING_DEPTH;
import static io.onceflow.config.ConfigKey.JSON_MAX_NUMBER_LENGTH;
import static io.onceflow.config.ConfigKey.JSON_MAX_STRING_LENGTH;
import static io.onceflow.config.ConfigKey.KAFKA_PROPERTIES_PREFIX;
import static io.onceflow.config.ConfigKey.MESSAGE_ID_MAX_LENGTH;
import static io.onceflow.config.ConfigKey.MESSAGE_ID_SOURCE;
import static io.onceflow.config.ConfigKey.MESSAGE_MAX_BYTES;
import static io.onceflow.config.ConfigKey.OUTPUT_TOPIC;
import static io.onceflow.config.ConfigKey.PARALLELISM;
import static io.onceflow.config.ConfigKey.PROCESSOR_CLASS;
import static io.onceflow.config.ConfigKey.PROCESSOR_MAX_ATTEMPTS;
import static io.onceflow.config.ConfigKey.PROCESSOR_RETRY_BACKOFF;
import static io.onceflow.config.ConfigKey.PROCESSOR_RETRY_BACKOFF_MAX;
import static io.onceflow.config.ConfigKey.RESTART_BUDGET;
import static io.onceflow.config.ConfigKey.STATE_BACKEND;
import static io.onceflow.config.ConfigKey.TRANSACTIONAL_ID_PREFIX;
import static io.onceflow.config.ConfigKey.TRANSACTION_TIMEOUT;
import static io.onceflow.config.ValueParsers.format;

import io.onceflow.ingest.JsonLimits;
import java.io.Serializable;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.Properties;
import java.util.Set;
import java.util.SortedMap;
import java.util.function.Function;
import java.util.regex.Pattern;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.base.DeliveryGuarantee;

/**
 * The validated, immutable configuration of an onceflow job.
 *
 * <p>Settings come from {@code --key value} arguments, optionally on top of Java properties files
 * ({@code --config FILE}, repeatable: a later file overrides an earlier one). {@code ${VAR}} and {@code ${VAR:-default}} in values are replaced from
 * the environment, and {@code ${file:/absolute/path}} by the file's content, so secrets need not be
 * written down. Values are trimmed, and an empty value
 * counts as not set. All problems are collected and reported together in one {@link
 * ConfigException}. See {@link #usage()} for every key.
 *
 * <p>Serializable so that Flink functions may capture it; it then carries its secrets into the job
 * graph, as the sinks need them anyway.
 */
public final class OnceflowConfig implements Serializable {
    private static final long serialVersionUID = 1L;

    private static final Duration SHORTEST_DURATION = Duration.ofMillis(1);
    /** Flink's CheckpointConfig refuses checkpoint intervals and timeouts below 10 ms. */
    private static final Duration SHORTEST_CHECKPOINT_TIME = Duration.ofMillis(10);

    /**
     * The shortest outage that Kafka output of a completed checkpoint must survive unless {@code
     * kafka.transaction.timeout.accept.loss.after.short.outage} says otherwise: above the default
     * restart.budget (7min, an automatic restart on flink-conf/config.yaml), with room for what that
     * budget does not cover (a JobManager failover, a rolling node replacement), and met by Kafka's
     * default transaction.max.timeout.ms (15min) with the default checkpoint settings (11min).
     */
    public static final Duration SHORTEST_OUTAGE_TO_SURVIVE = Duration.ofMinutes(10);

    private static final int MAX_MESSAGE_BYTES = 100 * 1024 * 1024;
    /** Flink's upper bound for (max) parallelism. */
    private static final int MAX_PARALLELISM = 32768;

    private static final Pattern TRANSACTIONAL_ID_PREFIX_PATTERN =
            Pattern.compile("[a-zA-Z0-9._-]{1,100}");

    /** A Kafka client property that onceflow sets itself, and what to tell a user who sets it. */
    private record ControlledKafkaProperty(String whatIsWrong, String whatToDo) {}

    private static final Map<String, ControlledKafkaProperty> CONTROLLED_KAFKA_PROPERTIES =
            Map.of(
                    "bootstrap.servers",
                    new ControlledKafkaProperty(
                            "is taken from kafka.bootstrap.servers",
                            "Set kafka.bootstrap.servers instead."),
                    "group.id",
                    new ControlledKafkaProperty(
                            "is taken from input.group.id", "Set input.group.id instead."),
                    "transactional.id",
                    new ControlledKafkaProperty(
                            "is derived by onceflow from kafka.transactional.id.prefix, one id per"
                                    + " writer",
                            "Set kafka.transactional.id.prefix instead."),
                    "transaction.timeout.ms",
                    new ControlledKafkaProperty(
                            "is taken from kafka.transaction.timeout, which is checked against the"
                                    + " checkpoint settings",
                            "Set kafka.transaction.timeout instead."),
                    "auto.offset.reset",
                    new ControlledKafkaProperty(
                            "is taken from input.starting.offsets",
                            "Set input.starting.offsets instead."),
                    "enable.auto.commit",
                    new ControlledKafkaProperty(
                            "is controlled by onceflow, which never auto-commits: offsets live in"
                                    + " Flink checkpoints so that a restart resumes exactly where"
                                    + " the last checkpoint ended",
                            "Remove it."),
                    "isolation.level",
                    new ControlledKafkaProperty(
                            "is controlled by onceflow, which reads with read_committed so that"
                                    + " records of aborted transactions are never processed",
                            "Remove it."));

    private final String bootstrapServers;
    private final Properties kafkaClientProperties;
    private final List<String> inputTopics;
    private final String groupId;
    private final StartingOffsets startingOffsets;
    private final String messageIdSourceSpec;
    // Integers are boxed only because they are null while a problem is pending; a built
    // configuration never holds null in a non-optional field.
    private final Integer maxMessageBytes;
    private final Integer maxIdLength;
    private final JsonLimits jsonLimits;
    private final Duration dedupTtl;
    private final String processorClass;
    private final ProcessorRetries processorRetries;
    private final String outputTopic;
    private final String deadLetterTopic;
    private final String transactionalIdPrefix;
    /** As set; null when not set: then the brokers' maximum, see {@link #kafkaTransactionTimeout(Optional)}. */
    private final Duration kafkaTransactionTimeout;
    private final Duration brokerTransactionMaxTimeout;
    private final boolean acceptLossAfterShortOutage;
    private final Duration checkpointInterval;
    private final Duration checkpointTimeout;
    private final Duration checkpointMinPause;
    private final Integer tolerableCheckpointFailures;
    private final Duration restartBudget;
    private final PendingWorkOnFreshStart pendingWorkOnFreshStart;
    private final String checkpointDir;
    private final Integer parallelism;
    private final DeliveryGuarantee deliveryGuarantee;
    private final StateBackendKind stateBackend;
    private final PostgresSettings postgres;
    private final SortedMap<String, String> effectiveSettings;
    /** Keys whose value came from a {@code ${file:...}} reference: secrets whatever their names. */
    private final Set<String> keysFromFiles;

    OnceflowConfig(ConfigReader settings) {
        bootstrapServers = settings.parsed(BOOTSTRAP_SERVERS, ValueParsers::hostAndPortList);
        kafkaClientProperties = readKafkaClientProperties(settings);
        inputTopics = settings.parsed(INPUT_TOPICS, ValueParsers::topicList);
        groupId = settings.text(INPUT_GROUP_ID);
        startingOffsets =
                settings.parsed(
                        INPUT_STARTING_OFFSETS,
                        ValueParsers.oneOf(
                                List.of(StartingOffsets.values()), StartingOffsets::configValue));
        messageIdSourceSpec = settings.parsed(MESSAGE_ID_SOURCE, ValueParsers::messageIdSource);
        maxMessageBytes =
                settings.parsed(MESSAGE_MAX_BYTES, ValueParsers.integerBetween(1, MAX_MESSAGE_BYTES));
        maxIdLength = settings.parsed(MESSAGE_ID_MAX_LENGTH, ValueParsers.integerBetween(1, 4096));
        jsonLimits = jsonLimits(settings);
        dedupTtl = settings.parsed(DEDUP_TTL, ValueParsers.durationAtLeast(SHORTEST_DURATION));
        // only the job loads the class (ProgramArguments.jobConfig); the audit need not have it
        processorClass = settings.text(PROCESSOR_CLASS);
        Integer processorMaxAttempts = settings.parsed(PROCESSOR_MAX_ATTEMPTS, ValueParsers.integerBetween(1, 100));
        Duration processorBackoff =
                settings.parsed(PROCESSOR_RETRY_BACKOFF, ValueParsers.durationAtLeast(SHORTEST_DURATION));
        Duration processorMaxBackoff =
                settings.parsed(PROCESSOR_RETRY_BACKOFF_MAX, ValueParsers.durationAtLeast(SHORTEST_DURATION));
        outputTopic = settings.parsed(OUTPUT_TOPIC, ValueParsers::topicName);
        deadLetterTopic = settings.parsed(DEAD_LETTER_TOPIC, ValueParsers::topicName);
        transactionalIdPrefix =
                settings.parsed(
                        TRANSACTIONAL_ID_PREFIX,
                        ValueParsers.matching(
                                TRANSACTIONAL_ID_PREFIX_PATTERN,
                                "is not a valid transactional id prefix",
                                "Use 1 to 100 of the characters a-z, A-Z, 0-9, '.', '_' and '-'."
                                        + " Keep it stable across restarts (after a failure Flink"
                                        + " finds the transactions to commit or abort by it) and"
                                        + " unique among jobs (jobs sharing it fence each other's"
                                        + " producers)."));
        kafkaTransactionTimeout =
                settings.parsed(
                        TRANSACTION_TIMEOUT, ValueParsers.durationAtLeast(SHORTEST_DURATION));
        brokerTransactionMaxTimeout =
                settings.parsed(
                        BROKER_TRANSACTION_MAX_TIMEOUT,
                        ValueParsers.durationAtLeast(SHORTEST_DURATION));
        // an invalid value is reported (and fails the configuration) and read as null
        acceptLossAfterShortOutage = Boolean.TRUE.equals(settings.parsed(ACCEPT_LOSS_AFTER_SHORT_OUTAGE,
                ValueParsers.oneOf(List.of(false, true), String::valueOf)));
        checkpointInterval =
                settings.parsed(
                        CHECKPOINT_INTERVAL,
                        ValueParsers.durationAtLeast(SHORTEST_CHECKPOINT_TIME));
        checkpointTimeout =
                settings.parsed(
                        CHECKPOINT_TIMEOUT, ValueParsers.durationAtLeast(SHORTEST_CHECKPOINT_TIME));
        checkpointMinPause =
                settings.parsed(CHECKPOINT_MIN_PAUSE, ValueParsers.durationAtLeast(Duration.ZERO));
        tolerableCheckpointFailures =
                settings.parsed(CHECKPOINT_TOLERABLE_FAILURES, ValueParsers.integerBetween(0, 100));
        restartBudget = settings.parsed(RESTART_BUDGET, ValueParsers.durationAtLeast(SHORTEST_DURATION));
        pendingWorkOnFreshStart =
                settings.parsed(
                        FRESH_START_PENDING,
                        ValueParsers.oneOf(
                                List.of(PendingWorkOnFreshStart.values()),
                                PendingWorkOnFreshStart::configValue));
        checkpointDir = settings.parsed(CHECKPOINT_DIR, ValueParsers::checkpointUri);
        parallelism =
                settings.parsed(PARALLELISM, ValueParsers.integerBetween(1, MAX_PARALLELISM));
        deliveryGuarantee =
                settings.parsed(
                        DELIVERY_GUARANTEE,
                        ValueParsers.oneOf(
                                List.of(
                                        DeliveryGuarantee.EXACTLY_ONCE,
                                        DeliveryGuarantee.AT_LEAST_ONCE),
                                guarantee -> guarantee.name().toLowerCase(Locale.ROOT).replace('_', '-')));
        stateBackend =
                settings.parsed(
                        STATE_BACKEND,
                        ValueParsers.oneOf(
                                List.of(StateBackendKind.values()), StateBackendKind::configValue));
        postgres = PostgresSettings.read(settings, transactionalIdPrefix);
        processorRetries = processorRetries(settings, processorMaxAttempts, processorBackoff, processorMaxBackoff);

        checkTopicsAreDistinct(settings);
        checkTransactionTimeout(settings);
        settings.throwIfAnyProblem();
        effectiveSettings = settings.effectiveValues();
        keysFromFiles = Set.copyOf(settings.keysFromFiles());
    }

    /**
     * Reads the configuration from command-line arguments.
     *
     * @param args {@code --key value} or {@code --key=value} pairs; {@code --config FILE} (repeatable)
     *     first loads Java properties files, a later file's keys overriding an earlier one's, and the
     *     other arguments override them all
     * @param environment environment variables for {@code ${VAR}} substitution, usually {@link
     *     System#getenv()}; {@code ${file:PATH}} reads the files of this machine
     * @return the validated configuration
     * @throws ConfigException listing every problem found
     */
    public static OnceflowConfig fromArgs(String[] args, Map<String, String> environment) {
        return ProgramArguments.parse(args, Set.of(), Set.of()).config(environment);
    }

    /**
     * Reads the configuration from a map of settings, as for tests and the demo.
     *
     * @param values keys (without {@code --}) and values; null values count as not set
     * @param environment environment variables for {@code ${VAR}} substitution
     * @return the validated configuration
     * @throws ConfigException listing every problem found
     */
    public static OnceflowConfig fromMap(Map<String, String> values, Map<String, String> environment) {
        return new OnceflowConfig(new ConfigReader(values, ValueSubstitution.of(environment), List.of()));
    }

    private static Properties readKafkaClientProperties(ConfigReader settings) {
        Properties properties = new Properties();
        settings.valuesWithPrefix(KAFKA_PROPERTIES_PREFIX)
                .forEach(
                        (name, value) -> {
                            ControlledKafkaProperty controlled =
                                    CONTROLLED_KAFKA_PROPERTIES.get(name);
                            if (controlled == null) {
                                properties.setProperty(name, value);
                            } else {
                                settings.problem(
                                        KAFKA_PROPERTIES_PREFIX + name,
                                        controlled.whatIsWrong(),
                                        controlled.whatToDo());
                            }
                        });
        return properties;
    }

    /** The retry settings, checked against each other and the checkpoint timeout; null after a problem. */
    private ProcessorRetries processorRetries(
            ConfigReader settings, Integer maxAttempts, Duration backoff, Duration maxBackoff) {
        if (maxAttempts == null || backoff == null || maxBackoff == null) {
            return null;
        }
        if (maxBackoff.compareTo(backoff) < 0) {
            settings.problem(
                    PROCESSOR_RETRY_BACKOFF_MAX,
                    format(maxBackoff) + " is shorter than processor.retry.backoff (" + format(backoff) + ")",
                    "Raise it to at least processor.retry.backoff, or lower that.");
            return null;
        }
        ProcessorRetries retries = new ProcessorRetries(maxAttempts, backoff, maxBackoff);
        if (checkpointTimeout == null) {
            return retries;
        }
        // the task thread pauses between attempts, and the checkpoint barrier waits behind it
        if (maxBackoff.compareTo(checkpointTimeout) >= 0) {
            settings.problem(
                    PROCESSOR_RETRY_BACKOFF_MAX,
                    format(maxBackoff) + " is not shorter than checkpoint.timeout (" + format(checkpointTimeout)
                            + "), and a checkpoint waits while an event pauses before its retry",
                    "Lower it (the default is " + PROCESSOR_RETRY_BACKOFF_MAX.defaultValue()
                            + "), or raise checkpoint.timeout.");
        } else if (retries.pausesOfAFailingEvent().compareTo(checkpointTimeout) >= 0) {
            settings.problem(
                    PROCESSOR_MAX_ATTEMPTS,
                    "the pauses between " + maxAttempts + " attempts at a failing event add up to "
                            + format(retries.pausesOfAFailingEvent()) + ", not shorter than checkpoint.timeout ("
                            + format(checkpointTimeout) + "), and a checkpoint waits for them",
                    "Lower it, processor.retry.backoff or processor.retry.backoff.max, or raise"
                            + " checkpoint.timeout.");
        }
        return retries;
    }

    private void checkTopicsAreDistinct(ConfigReader settings) {
        if (outputTopic != null && outputTopic.equals(deadLetterTopic)) {
            settings.problem(
                    DEAD_LETTER_TOPIC,
                    "is the same topic as output.topic",
                    "Give dead letters their own topic.");
        }
        rejectInputTopic(settings, OUTPUT_TOPIC, outputTopic);
        rejectInputTopic(settings, DEAD_LETTER_TOPIC, deadLetterTopic);
    }

    private void rejectInputTopic(ConfigReader settings, ConfigKey key, String topic) {
        if (inputTopics != null && topic != null && inputTopics.contains(topic)) {
            settings.problem(
                    key,
                    "'" + topic + "' is also in input.topics",
                    "Use a topic the job does not read, or it would consume its own output.");
        }
    }

    /** A problem with a key, before it is formatted. */
    private record Problem(String whatIsWrong, String whatToDo) {}

    private boolean checkpointSettingsValid() {
        return checkpointInterval != null
                && checkpointTimeout != null
                && checkpointMinPause != null
                && tolerableCheckpointFailures != null
                && restartBudget != null;
    }

    /**
     * A set kafka.transaction.timeout, checked offline. Without it the start check decides the timeout
     * from the brokers' maximum and checks it ({@link #kafkaTransactionTimeoutProblems}).
     */
    private void checkTransactionTimeout(ConfigReader settings) {
        if (kafkaTransactionTimeout == null) {
            return;
        }
        if (brokerTransactionMaxTimeout != null
                && kafkaTransactionTimeout.compareTo(brokerTransactionMaxTimeout) > 0) {
            settings.problem(
                    TRANSACTION_TIMEOUT,
                    format(kafkaTransactionTimeout)
                            + " exceeds the brokers' transaction.max.timeout.ms"
                            + " (kafka.transaction.timeout.broker.max = "
                            + format(brokerTransactionMaxTimeout) + "), so the brokers would refuse"
                            + " the producers",
                    "Lower it; or, if the brokers allow longer transactions, raise"
                            + " kafka.transaction.timeout.broker.max to match.");
        }
        if (!checkpointSettingsValid()) {
            return;
        }
        shorterThanLongestTransaction(kafkaTransactionTimeout, format(kafkaTransactionTimeout))
                .ifPresent(problem -> settings.problem(TRANSACTION_TIMEOUT, problem.whatIsWrong(), problem.whatToDo()));
    }

    /**
     * The longest a checkpoint's Kafka transaction has been open when the checkpoint that commits it
     * completes. A transaction opens when the sink passes checkpoint K's barrier, soon after K is
     * triggered, and is committed when a later checkpoint has completed. Flink triggers the next
     * checkpoint an interval after K, but not before K has ended (at most checkpoint.timeout) plus the
     * minimum pause; each tolerated failed checkpoint adds such a cycle, and the checkpoint that
     * completes takes up to checkpoint.timeout itself.
     */
    private Duration longestCheckpointCycle() {
        Duration cycle = max(checkpointInterval, checkpointTimeout.plus(checkpointMinPause));
        return cycle.multipliedBy(tolerableCheckpointFailures + 1L).plus(checkpointTimeout);
    }

    /** The terms of {@link #longestCheckpointCycle()}, as the messages show them. */
    private String longestCheckpointCycleTerms() {
        return "(" + tolerableCheckpointFailures + " + 1) x max(" + format(checkpointInterval) + ", "
                + format(checkpointTimeout) + " + " + format(checkpointMinPause) + ") + " + format(checkpointTimeout);
    }

    /**
     * A failure just after a checkpoint completed, before its transaction is committed, leaves the
     * transaction open until the restored job commits it: the timeout must outlive the longest
     * checkpoint cycle plus restart.budget.
     *
     * @param described the timeout as the message names it
     */
    private Optional<Problem> shorterThanLongestTransaction(Duration timeout, String described) {
        Duration longestTransaction = longestCheckpointCycle().plus(restartBudget);
        if (timeout.compareTo(longestTransaction) > 0) {
            return Optional.empty();
        }
        return Optional.of(new Problem(
                described
                        + " is not longer than the longest a checkpoint's transaction can stay open,"
                        + " (checkpoint.tolerable.failures + 1) x max(checkpoint.interval, checkpoint.timeout"
                        + " + checkpoint.min.pause) + checkpoint.timeout + restart.budget = "
                        + longestCheckpointCycleTerms() + " + " + format(restartBudget) + " = "
                        + format(longestTransaction) + ", assuming that a restart (noticing a lost"
                        + " TaskManager, the restart delay, the wait for slots) takes at most restart.budget = "
                        + format(restartBudget),
                "Raise it (the brokers' transaction.max.timeout.ms and kafka.transaction.timeout.broker.max"
                        + " with it), or lower checkpoint.tolerable.failures, checkpoint.timeout,"
                        + " checkpoint.min.pause or checkpoint.interval; set restart.budget to your cluster's"
                        + " heartbeat.timeout + longest restart delay + slot.request.timeout if they are not"
                        + " flink-conf/config.yaml's: a transaction must outlive its checkpoint plus a"
                        + " restart, or the broker aborts a pre-committed transaction and its records are"
                        + " lost."));
    }

    /**
     * Decides the Kafka producer transaction timeout of the sinks: {@code kafka.transaction.timeout}
     * if set, else the brokers' maximum as the start check read it, else (the job may not read it)
     * {@code kafka.transaction.timeout.broker.max}. The start check ({@code Preflight}) is the one
     * caller that knows the brokers' maximum; a job defined without it passes none.
     *
     * @param brokersMaximum the brokers' transaction.max.timeout.ms; empty if not read
     * @return the timeout to give the sinks' producers
     */
    public Duration kafkaTransactionTimeout(Optional<Duration> brokersMaximum) {
        if (kafkaTransactionTimeout != null) {
            return kafkaTransactionTimeout;
        }
        return brokersMaximum.orElse(brokerTransactionMaxTimeout);
    }

    /** The timeout {@link #kafkaTransactionTimeout(Optional)} decides, with where it comes from. */
    private String describeKafkaTransactionTimeout(Optional<Duration> brokersMaximum) {
        String timeout = "kafka.transaction.timeout " + format(kafkaTransactionTimeout(brokersMaximum));
        if (kafkaTransactionTimeout != null) {
            return timeout;
        }
        return timeout + (brokersMaximum.isPresent()
                ? " (not set: the brokers' transaction.max.timeout.ms)"
                : " (not set, and the brokers' transaction.max.timeout.ms could not be read:"
                        + " kafka.transaction.timeout.broker.max)");
    }

    /**
     * How long an outage Kafka output of a completed checkpoint survives with the timeout {@link
     * #kafkaTransactionTimeout(Optional)} decides: the timeout less the longest checkpoint cycle, the
     * most of it a pre-committed transaction may already have used when the job fails.
     *
     * @param brokersMaximum as for {@link #kafkaTransactionTimeout(Optional)}
     * @return a duration; zero or negative if it survives none
     */
    public Duration kafkaOutageSurvived(Optional<Duration> brokersMaximum) {
        return kafkaTransactionTimeout(brokersMaximum).minus(longestCheckpointCycle());
    }

    /**
     * The start check's line saying how long an outage Kafka output of a completed checkpoint
     * survives, and how that follows from the settings.
     *
     * @param brokersMaximum as for {@link #kafkaTransactionTimeout(Optional)}
     */
    public String kafkaOutageSurvivedLine(Optional<Duration> brokersMaximum) {
        Duration survived = kafkaOutageSurvived(brokersMaximum);
        return "Kafka output of a completed checkpoint survives an outage of up to "
                + (survived.isNegative() ? "0ms" : format(survived)) + " ("
                + describeKafkaTransactionTimeout(brokersMaximum) + " minus the longest checkpoint cycle "
                + longestCheckpointCycleTerms() + " = " + format(longestCheckpointCycle())
                + "): after a longer one the brokers abort its transactions and the output is lost";
    }

    /**
     * The problems of the timeout {@link #kafkaTransactionTimeout(Optional)} decides, one line each:
     * not longer than a checkpoint's transaction can stay open (see {@code kafka.transaction.timeout}),
     * or surviving an outage shorter than {@link #SHORTEST_OUTAGE_TO_SURVIVE} without {@code
     * kafka.transaction.timeout.accept.loss.after.short.outage=true}.
     *
     * @param brokersMaximum as for {@link #kafkaTransactionTimeout(Optional)}
     * @return the problems; empty if the timeout is safe or its risk accepted
     */
    public List<String> kafkaTransactionTimeoutProblems(Optional<Duration> brokersMaximum) {
        Duration timeout = kafkaTransactionTimeout(brokersMaximum);
        String described = describeKafkaTransactionTimeout(brokersMaximum);
        Optional<Problem> tooShort = shorterThanLongestTransaction(timeout, described);
        if (tooShort.isPresent()) {
            return List.of(ConfigException.problem(TRANSACTION_TIMEOUT.key(), tooShort.get().whatIsWrong(),
                    tooShort.get().whatToDo()));
        }
        Duration survived = kafkaOutageSurvived(brokersMaximum);
        if (acceptLossAfterShortOutage || survived.compareTo(SHORTEST_OUTAGE_TO_SURVIVE) >= 0) {
            return List.of();
        }
        return List.of(ConfigException.problem(TRANSACTION_TIMEOUT.key(),
                "Kafka output of a completed checkpoint would survive an outage of only " + format(survived)
                        + " (" + described + " minus the longest checkpoint cycle " + longestCheckpointCycleTerms()
                        + " = " + format(longestCheckpointCycle()) + "), less than the "
                        + format(SHORTEST_OUTAGE_TO_SURVIVE) + " the start check requires: after a longer outage"
                        + " (a JobManager failover, a node replacement) the brokers abort its transactions and the"
                        + " output is lost",
                "Raise the brokers' transaction.max.timeout.ms (and kafka.transaction.timeout with it, or leave"
                        + " that unset to use the brokers' maximum), or lower the checkpoint settings; or, to accept"
                        + " that loss, set " + ACCEPT_LOSS_AFTER_SHORT_OUTAGE.key() + "=true."));
    }

    /**
     * Tells whether the start check accepts a Kafka transaction timeout that survives an outage
     * shorter than {@link #SHORTEST_OUTAGE_TO_SURVIVE} ({@code
     * kafka.transaction.timeout.accept.loss.after.short.outage}).
     */
    public boolean acceptsLossAfterShortOutage() {
        return acceptLossAfterShortOutage;
    }

    private static Duration max(Duration a, Duration b) {
        return a.compareTo(b) >= 0 ? a : b;
    }

    /**
     * Returns the Kafka brokers ({@code kafka.bootstrap.servers}).
     *
     * @return a comma-separated host:port list
     */
    public String bootstrapServers() {
        return bootstrapServers;
    }

    /**
     * Returns the extra Kafka client properties ({@code kafka.properties.<name>}), by name without
     * the prefix, e.g. {@code security.protocol}. May hold secrets such as {@code
     * sasl.jaas.config}: never log them.
     *
     * @return a copy that the caller may modify
     */
    public Properties kafkaClientProperties() {
        Properties copy = new Properties();
        copy.putAll(kafkaClientProperties);
        return copy;
    }

    /**
     * Returns the topics to read ({@code input.topics}).
     *
     * @return distinct, valid topic names; unmodifiable
     */
    public List<String> inputTopics() {
        return inputTopics;
    }

    /**
     * Returns the Kafka consumer group ({@code input.group.id}).
     *
     * @return the group id
     */
    public String groupId() {
        return groupId;
    }

    /**
     * Returns where to start reading when there is no checkpoint or savepoint ({@code
     * input.starting.offsets}).
     *
     * @return the starting offsets
     */
    public StartingOffsets startingOffsets() {
        return startingOffsets;
    }

    /**
     * Returns where each message's id is ({@code message.id.source}).
     *
     * @return {@code header:<name>}, {@code json:<JSON pointer starting with />} or {@code key};
     *     syntax already validated
     */
    public String messageIdSourceSpec() {
        return messageIdSourceSpec;
    }

    /**
     * Returns the largest accepted message value ({@code message.max.bytes}).
     *
     * @return bytes, 1 to 104857600
     */
    public int maxMessageBytes() {
        return maxMessageBytes;
    }

    /**
     * Returns the longest accepted message id ({@code message.id.max.length}).
     *
     * @return characters, 1 to 4096
     */
    public int maxIdLength() {
        return maxIdLength;
    }

    /** Returns the JSON parser's limits on a value ({@code json.max.*}). */
    public JsonLimits jsonLimits() {
        return jsonLimits;
    }

    /** An invalid value is reported and fails the configuration; its default only fills the slot. */
    private static JsonLimits jsonLimits(ConfigReader settings) {
        Function<String, Integer> positive = ValueParsers.integerBetween(1, Integer.MAX_VALUE);
        JsonLimits defaults = JsonLimits.DEFAULTS;
        return new JsonLimits(
                Objects.requireNonNullElse(settings.parsed(JSON_MAX_NESTING_DEPTH, positive), defaults.maxNestingDepth()),
                Objects.requireNonNullElse(settings.parsed(JSON_MAX_NUMBER_LENGTH, positive), defaults.maxNumberLength()),
                Objects.requireNonNullElse(settings.parsed(JSON_MAX_NAME_LENGTH, positive), defaults.maxNameLength()),
                Objects.requireNonNullElse(settings.parsed(JSON_MAX_STRING_LENGTH, positive), defaults.maxStringLength()));
    }

    /**
     * Returns how long a message id is remembered for deduplication ({@code dedup.ttl}).
     *
     * @return a positive duration
     */
    public Duration dedupTtl() {
        return dedupTtl;
    }

    /**
     * Returns the name of the class holding the job's business logic ({@code processor.class}).
     *
     * @return a class name, checked only when the job reads its configuration ({@link
     *     ProgramArguments#jobConfig}, with the job's check: only the job loads the class); empty
     *     when events pass unchanged
     */
    public Optional<String> processorClass() {
        return Optional.ofNullable(processorClass);
    }

    /**
     * Returns how an event whose processor throws is retried ({@code processor.max.attempts},
     * {@code processor.retry.backoff}, {@code processor.retry.backoff.max}).
     *
     * @return the retry settings; their pauses are shorter than {@link #checkpointTimeout()}
     */
    public ProcessorRetries processorRetries() {
        return processorRetries;
    }

    /**
     * Returns the topic for deduplicated messages ({@code output.topic}).
     *
     * @return a topic that is neither an input topic nor the dead-letter topic
     */
    public String outputTopic() {
        return outputTopic;
    }

    /**
     * Returns the topic for messages that cannot be processed ({@code dead.letter.topic}).
     *
     * @return a topic that is neither an input topic nor the output topic
     */
    public String deadLetterTopic() {
        return deadLetterTopic;
    }

    /**
     * Returns the prefix of the Kafka transactional ids ({@code kafka.transactional.id.prefix}).
     *
     * @return 1 to 100 of {@code [a-zA-Z0-9._-]}
     */
    public String transactionalIdPrefix() {
        return transactionalIdPrefix;
    }

    /**
     * Returns the Kafka producer transaction timeout when the brokers' maximum is not known: {@code
     * kafka.transaction.timeout} if set, else {@code kafka.transaction.timeout.broker.max}; the job's
     * start check decides with the brokers' maximum instead ({@link #kafkaTransactionTimeout(Optional)}).
     *
     * @return if set, a duration longer than a checkpoint's transaction can stay open, {@link
     *     #restartBudget()} included, and at most {@link #brokerTransactionMaxTimeout()}
     */
    public Duration kafkaTransactionTimeout() {
        return kafkaTransactionTimeout(Optional.empty());
    }

    /**
     * Returns {@code kafka.transaction.timeout} as set.
     *
     * @return empty when not set: then the sinks use the brokers' maximum
     */
    public Optional<Duration> kafkaTransactionTimeoutSetting() {
        return Optional.ofNullable(kafkaTransactionTimeout);
    }

    /**
     * Returns the assumed longest time from a failure to the restored job ({@code restart.budget}),
     * part of what {@code kafka.transaction.timeout} must outlive.
     *
     * @return a positive duration
     */
    public Duration restartBudget() {
        return restartBudget;
    }

    /**
     * Returns the brokers' maximum transaction timeout as stated in the settings ({@code
     * kafka.transaction.timeout.broker.max}), for when the job may not read the brokers' own.
     *
     * @return a positive duration
     */
    public Duration brokerTransactionMaxTimeout() {
        return brokerTransactionMaxTimeout;
    }

    /**
     * Returns the time between checkpoints ({@code checkpoint.interval}).
     *
     * @return at least 10 ms
     */
    public Duration checkpointInterval() {
        return checkpointInterval;
    }

    /**
     * Returns the time after which a checkpoint is aborted ({@code checkpoint.timeout}).
     *
     * @return at least 10 ms
     */
    public Duration checkpointTimeout() {
        return checkpointTimeout;
    }

    /**
     * Returns the least pause between checkpoints ({@code checkpoint.min.pause}).
     *
     * @return zero or more
     */
    public Duration checkpointMinPause() {
        return checkpointMinPause;
    }

    /**
     * Returns how many checkpoints may fail in a row without failing the job ({@code
     * checkpoint.tolerable.failures}).
     *
     * @return 0 to 100
     */
    public int tolerableCheckpointFailures() {
        return tolerableCheckpointFailures;
    }

    /**
     * Returns what a start without checkpoint or savepoint does with an earlier run's pending
     * transactions ({@code fresh.start.pending}).
     *
     * @return refuse or discard
     */
    public PendingWorkOnFreshStart pendingWorkOnFreshStart() {
        return pendingWorkOnFreshStart;
    }

    /**
     * Returns the checkpoint storage URI ({@code checkpoint.dir}).
     *
     * @return a URI with scheme and directory; empty to use the cluster's setting
     */
    public Optional<String> checkpointDir() {
        return Optional.ofNullable(checkpointDir);
    }

    /**
     * Returns the job parallelism ({@code parallelism}).
     *
     * @return 1 to 32768; empty to use the cluster's setting
     */
    public OptionalInt parallelism() {
        return parallelism == null ? OptionalInt.empty() : OptionalInt.of(parallelism);
    }

    /**
     * Returns the delivery guarantee of the sinks ({@code delivery.guarantee}).
     *
     * @return {@link DeliveryGuarantee#EXACTLY_ONCE} or {@link DeliveryGuarantee#AT_LEAST_ONCE},
     *     never {@link DeliveryGuarantee#NONE}
     */
    public DeliveryGuarantee deliveryGuarantee() {
        return deliveryGuarantee;
    }

    /**
     * Returns the state backend ({@code state.backend}).
     *
     * @return the state backend kind
     */
    public StateBackendKind stateBackend() {
        return stateBackend;
    }

    /**
     * Returns the PostgreSQL sink settings ({@code postgres.*}).
     *
     * @return the settings; empty if {@code postgres.url} is not set, and then there is no
     *     PostgreSQL sink
     */
    public Optional<PostgresSettings> postgres() {
        return Optional.ofNullable(postgres);
    }

    /**
     * Returns every effective setting, defaults included, with secret values redacted. Keys of
     * optional settings that are not set are absent.
     *
     * @return an unmodifiable map sorted by key
     */
    public SortedMap<String, String> redactedMap() {
        return Secrets.redact(effectiveSettings, keysFromFiles);
    }

    /**
     * Tells whether {@code key}'s value is a secret: by its name ({@link Secrets#isSecretKey}), or
     * because it came from a {@code ${file:...}} reference.
     *
     * @param key a configuration key, e.g. {@code postgres.password}
     */
    public boolean isSecret(String key) {
        return Secrets.isSecretKey(key) || keysFromFiles.contains(key);
    }

    /**
     * Returns the non-empty values of every secret setting ({@link #isSecret}), for hiding them in
     * messages that quote other software's words. Never show what it returns.
     *
     * @return the values, in no particular order
     */
    public List<String> secretValues() {
        return effectiveSettings.entrySet().stream()
                .filter(setting -> isSecret(setting.getKey()) && !setting.getValue().isEmpty())
                .map(Map.Entry::getValue)
                .toList();
    }

    /**
     * Returns {@link #redactedMap()} as a Flink configuration, to register as the job's global job
     * parameters: Flink shows those in its web UI, so they must not hold secrets.
     *
     * @return a new Flink configuration
     */
    public Configuration toJobParameters() {
        return Configuration.fromMap(redactedMap());
    }

    /**
     * Returns a reference of all keys with their defaults and a description each, as printed by
     * {@code --help}.
     *
     * @return multi-line text
     */
    public static String usage() {
        StringBuilder usage =
                new StringBuilder(
                        """
                        Settings: [--config FILE ...] [--key value | --key=value ...]

                        Settings are read from the Java properties FILEs, each overriding the ones
                        before it, then from the --key value (or --key=value) arguments, which
                        override the files. ${VAR} or ${VAR:-default}
                        in a value is replaced from the environment, and ${file:/absolute/path} by the
                        file's content (less one trailing line break): pass secrets that way. Values are
                        trimmed; an empty value counts as not set. postgres.* keys apply only when
                        postgres.url is set.

                        """);
        for (ConfigKey key : ConfigKey.values()) {
            String presence =
                    key.required()
                            ? "required"
                            : key.defaultValue() == null
                                    ? "optional"
                                    : "default: " + key.defaultValue();
            appendUsageEntry(usage, key.key() + " (" + presence + ")", key.description());
        }
        appendUsageEntry(
                usage,
                KAFKA_PROPERTIES_PREFIX + "<name>",
                "Passed to the Kafka clients as <name>, e.g. security.protocol, sasl.mechanism,"
                        + " sasl.jaas.config, ssl.truststore.location, ssl.truststore.password.");
        return usage.toString();
    }

    private static void appendUsageEntry(StringBuilder usage, String title, String description) {
        usage.append("  ").append(title).append("\n      ").append(description).append('\n');
    }

    /** Shows every effective setting, with secret values redacted. */
    @Override
    public String toString() {
        return "OnceflowConfig" + redactedMap();
    }
}
