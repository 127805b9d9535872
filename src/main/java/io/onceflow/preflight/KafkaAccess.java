package io.onceflow.preflight;

import static io.onceflow.config.ConfigException.problem;

import io.onceflow.cli.ShellWords;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.sink.kafka.KafkaSinks;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeConsumerGroupsOptions;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.errors.GroupAuthorizationException;
import org.apache.kafka.common.errors.InvalidTxnTimeoutException;
import org.apache.kafka.common.errors.TransactionalIdAuthorizationException;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * What the job's Kafka principal must be allowed to do, found out by asking the brokers rather than
 * by reading ACLs (which the principal may not see): the operations the brokers say it may perform on
 * each topic and on the consumer group, and a transaction initialised under each transactional id
 * prefix of the sinks. Each missing permission is one problem line with the {@code kafka-acls.sh}
 * command that grants it.
 *
 * <p>The job needs: Read on the input topics (the source) and on the group (offsets fetched at a
 * start without checkpoint, committed for monitoring); Write on the output and dead-letter topics;
 * for exactly-once, Write on the transactional ids starting with {@code kafka.transactional.id.prefix}
 * (Write implies Describe, which the fresh-start check's listing of open transactions needs: without
 * it the brokers leave those transactions out of the list instead of refusing). The audit needs Read
 * on all three topics, and a live audit Describe on the group (asked when it reads the group's
 * offsets). A broker without an authorizer allows everything.
 */
final class KafkaAccess {
    /** The login name in a PLAIN or SCRAM JAAS configuration, which is not a secret. */
    private static final Pattern JAAS_USER_NAME = Pattern.compile("username\\s*=\\s*\"([^\"]*)\"");
    private static final String PROBE_SUFFIX = "-preflight";

    private final OnceflowConfig config;
    private final String brokers;
    private final String principal;
    private final String principalArgument;

    KafkaAccess(OnceflowConfig config) {
        this.config = config;
        this.brokers = config.bootstrapServers();
        String jaas = config.kafkaClientProperties().getProperty("sasl.jaas.config", "");
        Matcher user = JAAS_USER_NAME.matcher(jaas);
        boolean named = user.find();
        this.principal = "User:" + (named ? user.group(1) : "<the job's principal>");
        // a placeholder for the operator to replace stays as it is; a name from the settings is one word
        this.principalArgument = named ? ShellWords.quoted(principal) : principal;
    }

    /** The operation the topic named by {@code key} needs for {@code purpose}. */
    static AclOperation neededOnTopic(String key, Preflight.Purpose purpose) {
        return purpose == Preflight.Purpose.RUN_JOB && !key.equals("input.topics")
                ? AclOperation.WRITE
                : AclOperation.READ;
    }

    /**
     * The problem, if the brokers say the principal may not perform what {@code key}'s topic needs.
     *
     * @param authorized what the brokers allow on it; null if they did not say (no authorizer, old broker)
     */
    Optional<String> topicProblem(String key, String topic, Preflight.Purpose purpose, Set<AclOperation> authorized) {
        if (authorized == null || allows(authorized, neededOnTopic(key, purpose))) {
            return Optional.empty();
        }
        return Optional.of(topicRefused(key, topic, purpose));
    }

    /**
     * The problem for a topic the principal lacks what it needs on; also for one the brokers would not
     * even describe to it, since Read and Write both include Describe.
     */
    String topicRefused(String key, String topic, Preflight.Purpose purpose) {
        return refused(key, neededOnTopic(key, purpose), "the topic '" + topic + "'",
                "--topic " + ShellWords.quoted(topic));
    }

    /** The consumer group: Read, asked as the operations the brokers allow the principal on it. */
    Optional<String> groupProblem(Admin admin) throws InterruptedException {
        String group = config.groupId();
        try {
            ConsumerGroupDescription description = admin.describeConsumerGroups(List.of(group),
                            new DescribeConsumerGroupsOptions().includeAuthorizedOperations(true)
                                    .timeoutMs((int) Preflight.SERVICE_TIMEOUT.toMillis()))
                    .describedGroups().get(group).get(Preflight.SERVICE_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
            Set<AclOperation> authorized = description.authorizedOperations();
            if (authorized == null || allows(authorized, AclOperation.READ)) {
                return Optional.empty();
            }
        } catch (ExecutionException e) {
            if (!(e.getCause() instanceof GroupAuthorizationException)) {
                // e.g. a group that does not exist yet, of which a broker may tell nothing: the job creates it
                return Optional.empty();
            }
        } catch (java.util.concurrent.TimeoutException e) {
            return Optional.empty();
        }
        return Optional.of(refused("input.group.id", AclOperation.READ, "the consumer group '" + group + "'",
                "--group " + ShellWords.quoted(group)));
    }

    /**
     * Exactly-once: initialises a transaction under each sink's prefix ({@code <prefix>-output-preflight},
     * {@code <prefix>-dlq-preflight}), what the sinks' producers do first. The probe's id is left in the
     * brokers' transaction log with no transaction open (it expires after their
     * {@code transactional.id.expiration.ms}); it never collides with the sinks' own ids, which end in
     * numbers.
     */
    Optional<String> transactionalIdProblem(Duration transactionTimeout) {
        for (String sinkPrefix : KafkaSinks.transactionalIdPrefixes(config.transactionalIdPrefix())) {
            // the sinks' own producer settings and transaction timeout: the brokers refuse the probe when
            // they would refuse the sinks, a timeout above their maximum included
            Properties properties = KafkaSinks.producerProperties(config.kafkaClientProperties(), transactionTimeout);
            properties.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, brokers);
            properties.put(ProducerConfig.CLIENT_ID_CONFIG, "onceflow-preflight");
            properties.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, sinkPrefix + PROBE_SUFFIX);
            properties.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, String.valueOf(Preflight.SERVICE_TIMEOUT.toMillis()));
            try (KafkaProducer<byte[], byte[]> probe =
                    new KafkaProducer<>(properties, new ByteArraySerializer(), new ByteArraySerializer())) {
                probe.initTransactions();
            } catch (TransactionalIdAuthorizationException e) {
                return Optional.of(refused("kafka.transactional.id.prefix", AclOperation.WRITE,
                        "the transactional ids starting with '" + config.transactionalIdPrefix() + "'",
                        "--transactional-id " + ShellWords.quoted(config.transactionalIdPrefix())
                                + " --resource-pattern-type prefixed"));
            } catch (org.apache.kafka.common.config.ConfigException e) {
                return Optional.of(problem("kafka.properties", "the Kafka producer refuses its settings ("
                        + e.getMessage() + ")", "Fix the kafka.properties.<name> setting it names."));
            } catch (KafkaException e) {
                if (isTimeoutRefusal(e)) {
                    return Optional.of(problem("kafka.transaction.timeout", "the Kafka brokers at " + brokers
                                    + " refuse transactions of " + transactionTimeout.toSeconds()
                                    + " s: it exceeds their transaction.max.timeout.ms",
                            "Lower it (keeping it above its checkpoints plus restart.budget, docs/deploy.md),"
                                    + " or raise transaction.max.timeout.ms on the brokers."));
                }
                return Optional.of(problem("kafka.transactional.id.prefix",
                        "the Kafka brokers at " + brokers + " did not let the job start a transaction with the id '"
                                + sinkPrefix + PROBE_SUFFIX + "' (" + e.getMessage() + ")",
                        "Check that the brokers' transaction log is available (transaction.state.log.* settings)."));
            }
        }
        return Optional.empty();
    }

    /**
     * The brokers' INVALID_TRANSACTION_TIMEOUT, which the Kafka 4.2 producer passes on as a plain
     * KafkaException with the error's own message rather than as {@link InvalidTxnTimeoutException}.
     */
    private static boolean isTimeoutRefusal(KafkaException e) {
        return e instanceof InvalidTxnTimeoutException
                || String.valueOf(e.getMessage()).contains(Errors.INVALID_TRANSACTION_TIMEOUT.message());
    }

    private String refused(String key, AclOperation needed, String resource, String resourceArguments) {
        return problem(key, "the Kafka principal " + principal + " may not " + name(needed) + " " + resource + " at "
                + brokers, "Grant it: " + command(needed, resourceArguments));
    }

    /**
     * The {@code kafka-acls.sh} command an administrator runs to grant {@code operation}; every value
     * from the settings is one shell word, so that no setting can add arguments or shell syntax.
     *
     * @param resourceArguments the resource's options, their values already {@link ShellWords#quoted}
     */
    private String command(AclOperation operation, String resourceArguments) {
        return "kafka-acls.sh --bootstrap-server " + ShellWords.quoted(brokers) + " --command-config <admin client"
                + " properties> --add --allow-principal " + principalArgument + " --operation "
                + name(operation) + " " + resourceArguments;
    }

    private static boolean allows(Set<AclOperation> authorized, AclOperation needed) {
        return authorized.contains(needed) || authorized.contains(AclOperation.ALL);
    }

    private static String name(AclOperation operation) {
        String upper = operation.name();
        return upper.charAt(0) + upper.substring(1).toLowerCase(java.util.Locale.ROOT);
    }
}
