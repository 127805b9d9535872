package io.onceflow.preflight;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.onceflow.cli.CannotRunException;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.testing.SecuredKafka;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CompletableFuture;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.errors.InvalidTxnTimeoutException;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.BeforeEach;
import org.apache.kafka.common.KafkaException;
import org.junit.jupiter.api.Test;

/**
 * Review of issue 34 (adversarial): the Kafka start check against a SASL_SSL broker with the standard
 * authorizer (broker default transaction.max.timeout.ms = 15 min) and exactly the documented ACLs.
 * The first two tests are the review's findings (they failed before the probe took the sinks' own
 * producer settings and timeout); the others check what the review found sound.
 */
class KafkaAccessReviewIT {
    private static final SecuredKafka kafka = SecuredKafka.shared();

    private final Map<String, String> settings = new HashMap<>();
    private SecuredKafka.JobNames names;

    @BeforeEach
    void job() {
        names = kafka.newJob();
        settings.putAll(kafka.jobSettings(names, kafka.jobPassword()));
    }

    private List<String> problems() {
        try {
            Preflight.check(OnceflowConfig.fromMap(settings, Map.of()), Preflight.Purpose.RUN_JOB);
            return List.of();
        } catch (CannotRunException e) {
            return e.problems();
        }
    }

    private Properties producerProperties(String transactionalId, long transactionTimeoutMs) {
        Properties properties = OnceflowConfig.fromMap(settings, Map.of()).kafkaClientProperties();
        properties.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
        properties.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        properties.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, String.valueOf(transactionTimeoutMs));
        properties.put(ProducerConfig.ACKS_CONFIG, "all");
        properties.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        properties.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "15000");
        return properties;
    }

    /**
     * False pass. With the documented ACLs (no DescribeConfigs on the cluster) the check of the brokers'
     * transaction.max.timeout.ms is skipped, and the probe initialises its transaction with a 1 s timeout
     * instead of the job's, so a job whose kafka.transaction.timeout the brokers refuse passes the start
     * check and then fails at its sinks' first initTransactions (InvalidTxnTimeoutException) in a restart
     * loop. The probe with the job's own transaction.timeout.ms would have been refused.
     */
    @Test
    void aTransactionTimeoutTheBrokersRefuseIsCaughtWithTheDocumentedAcls() throws Exception {
        kafka.grantDocumentedAcls(names);
        // the user believes the brokers allow 1 h; they allow Kafka's default, 15 min
        settings.put("kafka.transaction.timeout", "20min");
        settings.put("kafka.transaction.timeout.broker.max", "1h");

        // what the job's output sink does first: refused by the brokers
        try (KafkaProducer<byte[], byte[]> sinkProducer = new KafkaProducer<>(
                producerProperties(names.transactionalIdPrefix() + "-output-0-1", 20 * 60_000L),
                new ByteArraySerializer(), new ByteArraySerializer())) {
            // Kafka 4.2's producer passes the brokers' INVALID_TRANSACTION_TIMEOUT on as a plain KafkaException
            assertThatThrownBy(sinkProducer::initTransactions).isInstanceOf(KafkaException.class)
                    .hasMessageContaining("transaction.max.timeout.ms");
        }

        assertThat(problems()).as("the start check refuses the job").containsExactly("kafka.transaction.timeout: the"
                + " Kafka brokers at " + kafka.bootstrapServers() + " refuse transactions of 1200 s: it exceeds their"
                + " transaction.max.timeout.ms. Lower it (keeping it above its checkpoints plus restart.budget,"
                + " docs/deploy.md), or raise transaction.max.timeout.ms on the brokers.");
    }

    /**
     * False alarm. The probe producer gets the pass-through properties as they are, while the sinks set
     * acks=all and enable.idempotence=true over them (KafkaSinks.build). With kafka.properties.acks=1 (or
     * retries=0, or max.in.flight.requests.per.connection above 5) the probe's own client refuses to start
     * ("Cannot set a transactional.id without also enabling idempotence"), and the check refuses a job that
     * would run, blaming the brokers' transaction log.
     */
    @Test
    void passThroughProducerTuningThatTheSinksOverrideDoesNotFailTheProbe() throws Exception {
        kafka.grantDocumentedAcls(names);
        settings.put("kafka.properties.acks", "1");

        // the sinks' producer, acks and idempotence as KafkaSinks sets them: it works
        try (KafkaProducer<byte[], byte[]> sinkProducer = new KafkaProducer<>(
                producerProperties(names.transactionalIdPrefix() + "-output-0-1", 60_000L),
                new ByteArraySerializer(), new ByteArraySerializer())) {
            sinkProducer.initTransactions();
        }

        assertThat(problems()).isEmpty();
    }

    // ---- what was found sound ----

    /** Prefixed and wildcard topic ACLs, ALL on the group: the brokers' answer covers them, no false alarm. */
    @Test
    void prefixedWildcardAndAllAclsPass() {
        AccessControlEntry read = entry(AclOperation.READ, AclPermissionType.ALLOW);
        AccessControlEntry write = entry(AclOperation.WRITE, AclPermissionType.ALLOW);
        String suffix = names.input().substring(3);
        kafka.grant(List.of(
                new AclBinding(new ResourcePattern(ResourceType.TOPIC, "in-", PatternType.PREFIXED), read),
                new AclBinding(new ResourcePattern(ResourceType.TOPIC, "*", PatternType.LITERAL), write),
                new AclBinding(new ResourcePattern(ResourceType.GROUP, "group-" + suffix, PatternType.LITERAL),
                        entry(AclOperation.ALL, AclPermissionType.ALLOW)),
                new AclBinding(new ResourcePattern(ResourceType.TRANSACTIONAL_ID, "*", PatternType.LITERAL), write)));
        try {
            assertThat(problems()).isEmpty();
        } finally {
            kafka.revoke(List.of(
                    new AclBinding(new ResourcePattern(ResourceType.TOPIC, "in-", PatternType.PREFIXED), read),
                    new AclBinding(new ResourcePattern(ResourceType.TOPIC, "*", PatternType.LITERAL), write),
                    new AclBinding(new ResourcePattern(ResourceType.TRANSACTIONAL_ID, "*", PatternType.LITERAL),
                            write)));
        }
    }

    /** A DENY on top of the documented ALLOWs is reported (the brokers evaluate DENY first). */
    @Test
    void aDenyOverAnAllowIsReported() throws Exception {
        kafka.grantDocumentedAcls(names);
        AclBinding deny = new AclBinding(new ResourcePattern(ResourceType.TRANSACTIONAL_ID,
                names.transactionalIdPrefix() + "-dlq", PatternType.PREFIXED), entry(AclOperation.WRITE,
                AclPermissionType.DENY));
        kafka.grant(List.of(deny));

        assertThat(problems()).singleElement().asString().startsWith("kafka.transactional.id.prefix: the Kafka"
                + " principal User:onceflow-job may not Write the transactional ids");
    }

    /**
     * The probe does not touch a running job: an open transaction of the sink (id <prefix>-output-0-1)
     * commits after the start check ran, and two checks at once both pass.
     */
    @Test
    void theProbeLeavesARunningSinksTransactionAloneAndChecksMayRunConcurrently() throws Exception {
        kafka.grantDocumentedAcls(names);
        try (KafkaProducer<byte[], byte[]> sinkProducer = new KafkaProducer<>(
                producerProperties(names.transactionalIdPrefix() + "-output-0-1", 60_000L),
                new ByteArraySerializer(), new ByteArraySerializer())) {
            sinkProducer.initTransactions();
            sinkProducer.beginTransaction();
            sinkProducer.send(new ProducerRecord<>(names.output(), "x".getBytes())).get();

            List<CompletableFuture<List<String>>> checks = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                checks.add(CompletableFuture.supplyAsync(this::problems));
            }
            for (CompletableFuture<List<String>> check : checks) {
                assertThat(check.get()).isEmpty();
            }

            sinkProducer.commitTransaction();
        }
    }

    private static AccessControlEntry entry(AclOperation operation, AclPermissionType type) {
        return new AccessControlEntry("User:" + SecuredKafka.JOB_USER, "*", operation, type);
    }
}
