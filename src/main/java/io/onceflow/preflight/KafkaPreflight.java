package io.onceflow.preflight;

import static io.onceflow.config.ConfigException.problem;

import io.onceflow.config.OnceflowConfig;
import io.onceflow.config.PostgresSettings;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.AuthenticationException;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.SslAuthenticationException;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The Kafka part of the {@link Preflight}: the brokers answer, every topic the job reads or writes
 * exists, the job's principal may do what it needs ({@link KafkaAccess}), and (exactly-once only) the
 * brokers allow the job's transaction timeout and can keep the transaction log with as many replicas
 * as they are. It reads the brokers' transaction.max.timeout.ms, which is the job's transaction
 * timeout when kafka.transaction.timeout is not set ({@link OnceflowConfig#kafkaTransactionTimeout(Optional)}),
 * and refuses a timeout that survives too short an outage ({@link OnceflowConfig#kafkaTransactionTimeoutProblems}).
 */
final class KafkaPreflight {
    private static final Logger LOG = LoggerFactory.getLogger(KafkaPreflight.class);
    private static final String TRANSACTION_STATE_TOPIC = "__transaction_state";

    private final OnceflowConfig config;
    private final Preflight.Purpose purpose;
    private final String brokers;
    private final KafkaAccess access;
    private final List<String> problems = new ArrayList<>();
    private Optional<Duration> brokersTransactionMaxTimeout = Optional.empty();

    KafkaPreflight(OnceflowConfig config, Preflight.Purpose purpose) {
        this.config = config;
        this.purpose = purpose;
        this.brokers = config.bootstrapServers();
        this.access = new KafkaAccess(config);
    }

    /**
     * The warning to log, if any: brokers that are not on this host reached without TLS, where an
     * attacker on the network path may read the credentials and the records. (TLS without host name
     * verification cannot be configured: an empty value counts as not set, which keeps Kafka's https.)
     *
     * @return one line naming the key and the fix, or empty
     */
    static Optional<String> unencryptedWarning(OnceflowConfig config) {
        boolean remote = Arrays.stream(config.bootstrapServers().split(","))
                .map(server -> server.strip().replaceFirst(":[0-9]+$", "").replaceAll("^\\[|]$", ""))
                .anyMatch(host -> !Preflight.isLoopbackHost(host));
        String protocol = config.kafkaClientProperties().getProperty("security.protocol", "PLAINTEXT")
                .toUpperCase(Locale.ROOT);
        if (remote && !protocol.endsWith("SSL")) {
            return Optional.of(problem("kafka.properties.security.protocol",
                    "the job reaches the Kafka brokers at " + config.bootstrapServers() + " with " + protocol
                            + ", without TLS: passwords and records cross the network readable",
                    "Use a TLS listener: security.protocol SASL_SSL or SSL (docs/security.md)."));
        }
        return Optional.empty();
    }

    List<String> problems() {
        unencryptedWarning(config).ifPresent(warning -> LOG.warn(warning));
        Properties properties = config.kafkaClientProperties();
        properties.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, brokers);
        properties.put(AdminClientConfig.CLIENT_ID_CONFIG, "onceflow-preflight");
        int timeoutMs = (int) Preflight.SERVICE_TIMEOUT.toMillis();
        properties.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, String.valueOf(timeoutMs / 2));
        properties.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, String.valueOf(timeoutMs));
        long started = System.nanoTime();
        try (Admin admin = Admin.create(properties)) {
            Collection<Node> nodes = admin.describeCluster(new DescribeClusterOptions().timeoutMs(timeoutMs))
                    .nodes().get(timeoutMs + 1000L, TimeUnit.MILLISECONDS);
            checkTopics(admin);
            if (purpose == Preflight.Purpose.RUN_JOB) {
                access.groupProblem(admin).ifPresent(problems::add);
                if (config.deliveryGuarantee() == DeliveryGuarantee.EXACTLY_ONCE) {
                    int before = problems.size();
                    checkTransactions(admin, nodes);
                    if (problems.size() == before) {
                        // a probe of brokers that cannot start transactions would only time out
                        access.transactionalIdProblem(config.kafkaTransactionTimeout(brokersTransactionMaxTimeout))
                                .ifPresent(problems::add);
                        problems.addAll(config.kafkaTransactionTimeoutProblems(brokersTransactionMaxTimeout));
                    }
                }
            }
        } catch (ExecutionException | java.util.concurrent.TimeoutException e) {
            problems.add(unreachable(e instanceof ExecutionException ? e.getCause() : e, started));
        } catch (org.apache.kafka.common.config.ConfigException e) {
            problems.add(problem("kafka.properties",
                    "the Kafka client refuses its settings (" + e.getMessage() + ")",
                    "Fix the kafka.properties.<name> setting it names."));
        } catch (KafkaException e) {
            problems.add(unreachable(e, started));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            problems.add(unreachable(e, started));
        }
        return problems;
    }

    /** @param started when the client was created ({@link System#nanoTime}), to say how long it tried */
    private String unreachable(Throwable cause, long started) {
        if (cause instanceof SslAuthenticationException) {
            return problem("kafka.properties.ssl.truststore",
                    "the TLS handshake with the Kafka brokers at " + brokers + " failed (" + cause.getMessage() + ")",
                    "Trust the certificate authority that signed the brokers' certificates"
                            + " (kafka.properties.ssl.truststore.certificates or .location), and connect by a"
                            + " name the certificates list; never turn host name verification off.");
        }
        if (cause instanceof AuthenticationException) {
            return problem("kafka.properties.sasl.jaas.config",
                    "the Kafka brokers at " + brokers + " refused the client's authentication ("
                            + cause.getMessage() + ")",
                    "Check the credentials and kafka.properties.security.protocol, sasl.mechanism and ssl.*.");
        }
        if (cause instanceof AuthorizationException) {
            return problem("kafka.bootstrap.servers",
                    "the Kafka brokers at " + brokers + " refused to describe the cluster (" + cause.getMessage() + ")",
                    "Grant the job's principal Describe on the cluster and the topics.");
        }
        return problem("kafka.bootstrap.servers",
                "no Kafka broker answered at " + brokers + " (gave up after " + Preflight.secondsSince(started) + ")"
                        + reason(cause),
                "Check the host names and ports, that the brokers run, and that they are reachable from where"
                        + " the job's main method runs (the flink run client, or the JobManager for a REST"
                        + " submission); for TLS or SASL set kafka.properties.security.protocol.");
    }

    /**
     * The client's own reason when it is not a plain timeout, e.g. that a host name does not
     * resolve: why it gave up before the limit.
     */
    private static String reason(Throwable cause) {
        boolean timedOut = cause instanceof java.util.concurrent.TimeoutException
                || cause instanceof org.apache.kafka.common.errors.TimeoutException;
        return timedOut || cause.getMessage() == null ? "" : ": " + cause.getMessage();
    }

    private void checkTopics(Admin admin) throws InterruptedException {
        Map<String, String> keyOfTopic = new LinkedHashMap<>();
        config.inputTopics().forEach(topic -> keyOfTopic.put(topic, "input.topics"));
        keyOfTopic.put(config.outputTopic(), "output.topic");
        keyOfTopic.put(config.deadLetterTopic(), "dead.letter.topic");
        config.postgres().flatMap(PostgresSettings::effectResultsTopic)
                .ifPresent(topic -> keyOfTopic.putIfAbsent(topic, "postgres.effect.results.topic"));
        Map<String, KafkaFuture<TopicDescription>> descriptions = admin.describeTopics(keyOfTopic.keySet(),
                new DescribeTopicsOptions().includeAuthorizedOperations(true)
                        .timeoutMs((int) Preflight.SERVICE_TIMEOUT.toMillis())).topicNameValues();
        int inputPartitions = 0;
        List<String> missing = new ArrayList<>();
        for (Map.Entry<String, String> topicAndKey : keyOfTopic.entrySet()) {
            String topic = topicAndKey.getKey();
            try {
                TopicDescription description = descriptions.get(topic).get();
                if (topicAndKey.getValue().equals("input.topics")) {
                    inputPartitions = Math.max(inputPartitions, description.partitions().size());
                }
                access.topicProblem(topicAndKey.getValue(), topic, purpose, description.authorizedOperations())
                        .ifPresent(problems::add);
            } catch (ExecutionException e) {
                if (e.getCause() instanceof UnknownTopicOrPartitionException) {
                    missing.add(topic);
                } else if (e.getCause() instanceof TopicAuthorizationException) {
                    problems.add(access.topicRefused(topicAndKey.getValue(), topic, purpose));
                } else {
                    problems.add(problem(topicAndKey.getValue(),
                            "cannot describe the topic '" + topic + "' on " + brokers + " (" + e.getCause().getMessage() + ")",
                            "Grant the job's principal Describe, Read and Write on it."));
                }
            }
        }
        int partitions = inputPartitions > 0 ? inputPartitions : 1;
        for (String topic : missing) {
            String key = keyOfTopic.get(topic);
            String fix = key.equals("input.topics")
                    ? "Fix the name, or create it"
                    : "onceflow does not create topics: create it";
            problems.add(problem(key, "the topic '" + topic + "' does not exist on " + brokers,
                    fix + ", e.g. kafka-topics.sh --bootstrap-server " + brokers + " --create --topic " + topic
                            + " --partitions " + partitions + "."));
        }
    }

    /**
     * Reads the brokers' transaction settings: their lowest transaction.max.timeout.ms decides the
     * sinks' transaction timeout when kafka.transaction.timeout is not set. A principal that may not
     * describe the brokers' configuration is not an error: the job may still work, so the timeout falls
     * back to kafka.transaction.timeout.broker.max with a log line saying why.
     */
    private void checkTransactions(Admin admin, Collection<Node> nodes) throws InterruptedException {
        if (nodes.isEmpty()) {
            return;
        }
        List<ConfigResource> brokerResources = nodes.stream()
                .map(node -> new ConfigResource(ConfigResource.Type.BROKER, node.idString())).toList();
        Map<ConfigResource, Config> brokerConfigs;
        try {
            brokerConfigs = admin.describeConfigs(brokerResources,
                    new DescribeConfigsOptions().timeoutMs((int) Preflight.SERVICE_TIMEOUT.toMillis()))
                    .all().get();
        } catch (ExecutionException e) {
            LOG.info("Could not read the brokers' transaction settings ({}): the Kafka transaction timeout is {},"
                    + " and the brokers' transaction.max.timeout.ms is not checked. Grant the job's principal"
                    + " DescribeConfigs on the cluster (docs/security.md) to let the job read and use it",
                    e.getCause().toString(), config.kafkaTransactionTimeoutSetting().isPresent()
                            ? "kafka.transaction.timeout" : "kafka.transaction.timeout.broker.max = "
                                    + seconds(config.brokerTransactionMaxTimeout()));
            return;
        }
        Config brokerConfig = brokerConfigs.values().iterator().next();
        Duration brokerMax = brokerConfigs.values().stream()
                .map(each -> Duration.ofMillis(Long.parseLong(each.get("transaction.max.timeout.ms").value())))
                .min(Duration::compareTo).orElseThrow();
        brokersTransactionMaxTimeout = Optional.of(brokerMax);
        Optional<Duration> setting = config.kafkaTransactionTimeoutSetting();
        if (setting.isPresent() && setting.get().compareTo(brokerMax) > 0) {
            problems.add(problem("kafka.transaction.timeout",
                    seconds(setting.get()) + " exceeds the brokers' transaction.max.timeout.ms ("
                            + seconds(brokerMax) + " at " + brokers + "), so the brokers would refuse every transaction",
                    "Lower kafka.transaction.timeout (keeping it above its checkpoints plus restart.budget, docs/deploy.md),"
                            + " or leave it unset to use the brokers' maximum, or raise transaction.max.timeout.ms on"
                            + " the brokers."));
        }
        int replicas = Integer.parseInt(brokerConfig.get("transaction.state.log.replication.factor").value());
        if (replicas > nodes.size() && !transactionLogExists(admin)) {
            problems.add(problem("kafka.bootstrap.servers",
                    "the Kafka cluster at " + brokers + " cannot start transactions: its"
                            + " transaction.state.log.replication.factor is " + replicas + " but it has "
                            + nodes.size() + " broker(s)",
                    "Set transaction.state.log.replication.factor and transaction.state.log.min.isr to at most"
                            + " the number of brokers on the brokers and restart them, or add brokers."));
        }
    }

    /**
     * The brokers' lowest transaction.max.timeout.ms, as {@link #problems()} read it.
     *
     * @return empty if not read: the job may not describe the brokers' configuration, or does not use
     *     transactions (the audit, at-least-once)
     */
    Optional<Duration> brokersTransactionMaxTimeout() {
        return brokersTransactionMaxTimeout;
    }

    private boolean transactionLogExists(Admin admin) throws InterruptedException {
        try {
            admin.describeTopics(List.of(TRANSACTION_STATE_TOPIC)).allTopicNames().get();
            return true;
        } catch (ExecutionException e) {
            return !(e.getCause() instanceof UnknownTopicOrPartitionException);
        }
    }

    private static String seconds(Duration duration) {
        return duration.toSeconds() + " s";
    }
}
