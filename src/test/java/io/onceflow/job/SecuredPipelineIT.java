package io.onceflow.job;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.onceflow.cli.CannotRunException;
import io.onceflow.cli.ExitCode;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.preflight.Preflight;
import io.onceflow.testing.FailureInjector;
import io.onceflow.testing.MiniClusters;
import io.onceflow.testing.DocumentedGrants;
import io.onceflow.testing.SecuredKafka;
import io.onceflow.testing.SecuredPostgres;
import io.onceflow.testing.TestCertificates;
import io.onceflow.testing.TestPostgres;
import io.onceflow.tools.audit.AuditCommand;
import io.onceflow.tools.audit.AuditReport;
import io.onceflow.tools.audit.CommittedTopicReader;
import io.onceflow.tools.generator.EventGenerator;
import io.onceflow.tools.generator.GeneratedInput;
import io.onceflow.tools.generator.GeneratorSpec;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.UUID;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.flink.util.FileUtils;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;

/**
 * The whole job as a payments team runs it: Kafka over {@code SASL_SSL} with SCRAM and the standard
 * authorizer, the job's principal holding exactly docs/security.md's ACLs, and PostgreSQL over TLS with
 * {@code sslmode=verify-full} and a SCRAM login holding exactly the documented grants. The start check
 * passes, the job runs through a failure injected after a checkpoint's snapshot, every id is once in the
 * topic and the table, and the audit and the CLI's {@code check} and {@code audit} work over the same
 * connections; with the transactional-id ACL removed the start check fails with the command that
 * grants it.
 */
class SecuredPipelineIT {
    private static final long RECORDS = 3_000;

    @RegisterExtension
    static final MiniClusterExtension FLINK = MiniClusters.fourSlots();

    private static final SecuredKafka kafka = SecuredKafka.shared();
    private static Path postgresDirectory;
    private static SecuredPostgres postgres;
    @TempDir
    Path directory;
    private SecuredKafka.JobNames names;
    private List<AclBinding> acls;
    private final Map<String, String> settings = new HashMap<>();

    @BeforeAll
    static void startPostgres() throws Exception {
        postgresDirectory = Files.createTempDirectory("onceflow-secured-postgres");
        postgres = SecuredPostgres.start(postgresDirectory.resolve("server"),
                TestCertificates.newAuthority(postgresDirectory.resolve("tls")));
    }

    @AfterAll
    static void stopPostgres() {
        if (postgres != null) {
            postgres.close();
        }
        FileUtils.deleteDirectoryQuietly(postgresDirectory.toFile());
    }

    @BeforeEach
    void topicsAclsAndDatabase() throws Exception {
        String suffix = UUID.randomUUID().toString().substring(0, 8);
        names = new SecuredKafka.JobNames("in-" + suffix, "out-" + suffix, "dlq-" + suffix, "group-" + suffix,
                "secured-" + suffix);
        kafka.createTopics(4, names.input(), names.output());
        kafka.createTopics(2, names.deadLetter());
        acls = kafka.grantDocumentedAcls(names);
        // the audit reads the job's outputs too (docs/security.md)
        kafka.grantRead(names.output(), names.deadLetter());
        settings.putAll(kafka.jobSettings(names, kafka.jobPassword()));
        // the JAAS configuration as a Kubernetes Secret mounted as a file gives it (docs/security.md)
        Path jaas = directory.resolve("kafka-jaas");
        Files.writeString(jaas, settings.get("kafka.properties.sasl.jaas.config") + "\n");
        settings.put("kafka.properties.sasl.jaas.config", "${file:" + jaas + "}");
        settings.putAll(Map.of("message.max.bytes", "4096", "message.id.max.length", "64",
                "checkpoint.interval", "300ms", "checkpoint.timeout", "1min", "kafka.transaction.timeout", "5min"));
        settings.putAll(Map.of("restart.budget", "1min", "state.backend", "hashmap", "parallelism", "2",
                // 5min less a checkpoint cycle of 2min survives a 3min outage: a test's, below the start's floor
                "kafka.transaction.timeout.accept.loss.after.short.outage", "true"));
        TestPostgres.TestDatabase database = postgres.newDatabase();
        SecuredPostgres.Login login = postgres.newJobRole(database);
        Path password = directory.resolve("postgres-password");
        Files.writeString(password, login.password() + "\n");
        settings.putAll(Map.of("postgres.url", postgres.jdbcUrl(database), "postgres.user", login.user(),
                "postgres.password", "${file:" + password + "}", "postgres.sink.prefix", "secured_" + suffix,
                "postgres.effect.function", DocumentedGrants.EFFECT));
    }

    private OnceflowConfig config() {
        return OnceflowConfig.fromMap(settings, Map.of());
    }

    @Test
    void everyIdOnceThroughTlsScramAndAcls() throws Exception {
        GeneratedInput truth = produceInput();
        OnceflowConfig config = config();
        Preflight.check(config, Preflight.Purpose.RUN_JOB);

        FailureInjector failure = FailureInjector.midRun(names.input(),
                FailureInjector.Moment.AFTER_SNAPSHOT_BEFORE_COMPLETION, RECORDS);
        ExactlyOnceIT.boundedJob(config, failure).execute("secured");

        assertThat(FailureInjector.restartedAfterFiring(names.input())).as("the injected failure restarted the job")
                .isTrue();
        Map<String, Integer> outputPerId = new HashMap<>();
        new CommittedTopicReader(clientProperties(config)).read(names.output(), Duration.ofSeconds(60),
                record -> outputPerId.merge(new String(record.key(), UTF_8), 1, Integer::sum));
        assertThat(outputPerId.keySet()).containsExactlyInAnyOrderElementsOf(truth.uniqueIds());
        assertThat(outputPerId.values()).containsOnly(1);

        AuditReport audit = AuditCommand.forConfig(config).run(Duration.ofSeconds(60));
        assertThat(audit.problems()).isEmpty();
        assertThat(audit.postgresAudited()).isTrue();
        assertThat(audit.postgresRows()).isEqualTo(truth.uniqueIds().size());
        assertThat(audit.maxDeliveries()).isEqualTo(1);
        assertThat(audit.preparedTransactionsLeft()).isZero();
        assertThat(audit.effectsApplied()).as("effects applied by the workers over TLS").isEqualTo(truth.uniqueIds().size());

        // what bin/onceflow check and bin/onceflow audit run
        assertThat(OnceflowJob.execute(arguments("--check"), Optional.empty())).isEqualTo(ExitCode.CLEAN);
        assertThat(AuditCommand.execute(arguments())).isEqualTo(ExitCode.CLEAN);
    }

    @Test
    void withoutTheTransactionalIdAclTheStartCheckNamesTheGrant() throws Exception {
        kafka.revoke(acls.stream()
                .filter(binding -> binding.pattern().resourceType() == ResourceType.TRANSACTIONAL_ID).toList());

        assertThatThrownBy(() -> OnceflowJob.execute(arguments("--check"), Optional.empty()))
                .isInstanceOfSatisfying(CannotRunException.class, e -> assertThat(e.problems()).containsExactly(
                        "kafka.transactional.id.prefix: the Kafka principal User:onceflow-job may not Write the"
                                + " transactional ids starting with '" + names.transactionalIdPrefix() + "' at "
                                + kafka.bootstrapServers() + ". Grant it: kafka-acls.sh --bootstrap-server "
                                + kafka.bootstrapServers() + " --command-config <admin client properties> --add"
                                + " --allow-principal User:onceflow-job --operation Write --transactional-id "
                                + names.transactionalIdPrefix() + " --resource-pattern-type prefixed"));
    }

    @Test
    void withoutDescribeOnTheGroupALiveAuditNamesTheGrant() {
        kafka.revoke(acls.stream().filter(binding -> binding.pattern().resourceType() == ResourceType.GROUP).toList());

        assertThatThrownBy(() -> AuditCommand.execute(arguments("--live")))
                .isInstanceOfSatisfying(CannotRunException.class, e -> assertThat(e.problems()).containsExactly(
                        "input.group.id: the Kafka principal may not Describe the consumer group '" + names.group()
                                + "' at " + kafka.bootstrapServers() + ", whose committed offsets bound a live audit."
                                + " Grant it: kafka-acls.sh --bootstrap-server " + kafka.bootstrapServers()
                                + " --command-config <admin client properties> --add --allow-principal <the audit's"
                                + " principal> --operation Describe --group " + names.group()));
    }

    /** The command line of the job or the audit with the test's settings, after {@code flags}. */
    private String[] arguments(String... flags) {
        List<String> args = new ArrayList<>(List.of(flags));
        settings.forEach((key, value) -> args.addAll(List.of("--" + key, value)));
        return args.toArray(String[]::new);
    }

    private static Properties clientProperties(OnceflowConfig config) {
        Properties properties = config.kafkaClientProperties();
        properties.put("bootstrap.servers", config.bootstrapServers());
        return properties;
    }

    /** The input, produced by the super user over the plaintext listener (the job does not write it). */
    private GeneratedInput produceInput() {
        OnceflowConfig config = config();
        GeneratorSpec spec = new GeneratorSpec(RECORDS, 0.10, 0.02, 0, config.maxMessageBytes(), config.maxIdLength(), 11);
        Properties producer = new Properties();
        producer.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.plaintextBootstrapServers());
        producer.put(ProducerConfig.ACKS_CONFIG, "all");
        producer.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "1");
        try (KafkaProducer<byte[], byte[]> input =
                new KafkaProducer<>(producer, new ByteArraySerializer(), new ByteArraySerializer())) {
            return new EventGenerator(spec).produce(input, names.input());
        }
    }
}
