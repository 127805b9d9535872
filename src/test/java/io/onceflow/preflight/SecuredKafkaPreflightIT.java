package io.onceflow.preflight;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.cli.CannotRunException;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.testing.SecuredKafka;
import io.onceflow.testing.TestCertificates;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.acl.AclBinding;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The start check against a broker with TLS, SCRAM and the standard authorizer: the documented ACLs
 * pass, each one revoked in turn is one line with the command that grants it back, and a wrong
 * password, an untrusted or misnamed certificate and a plaintext listener are each refused in one line.
 */
class SecuredKafkaPreflightIT {
    private static final SecuredKafka kafka = SecuredKafka.shared();

    private final Map<String, String> settings = new HashMap<>();
    private SecuredKafka.JobNames names;

    @BeforeEach
    void job() {
        names = kafka.newJob();
        settings.putAll(kafka.jobSettings(names, kafka.jobPassword()));
    }

    private List<String> problems(Preflight.Purpose purpose) {
        try {
            Preflight.check(OnceflowConfig.fromMap(settings, Map.of()), purpose);
            return List.of();
        } catch (CannotRunException e) {
            return e.problems();
        }
    }

    @Test
    void theDocumentedAclsAreEnoughForExactlyOnce() throws Exception {
        assertThat(problems(Preflight.Purpose.RUN_JOB)).as("no ACL yet").isNotEmpty();

        kafka.grantDocumentedAcls(names);

        assertThat(problems(Preflight.Purpose.RUN_JOB)).isEmpty();
    }

    @Test
    void eachDocumentedAclRevokedIsOneLineWithItsGrantCommand() throws Exception {
        List<AclBinding> documented = kafka.grantDocumentedAcls(names);
        Map<String, String> expectedLine = Map.of(
                names.input(), refused("input.topics", "Read", "the topic '" + names.input() + "'",
                        "--topic " + names.input()),
                names.group(), refused("input.group.id", "Read", "the consumer group '" + names.group() + "'",
                        "--group " + names.group()),
                names.output(), refused("output.topic", "Write", "the topic '" + names.output() + "'",
                        "--topic " + names.output()),
                names.deadLetter(), refused("dead.letter.topic", "Write", "the topic '" + names.deadLetter() + "'",
                        "--topic " + names.deadLetter()),
                names.transactionalIdPrefix(), refused("kafka.transactional.id.prefix", "Write",
                        "the transactional ids starting with '" + names.transactionalIdPrefix() + "'",
                        "--transactional-id " + names.transactionalIdPrefix() + " --resource-pattern-type prefixed"));
        assertThat(documented).hasSize(expectedLine.size());
        for (AclBinding binding : documented) {
            kafka.revoke(List.of(binding));
            List<String> problems = problems(Preflight.Purpose.RUN_JOB);
            kafka.grant(List.of(binding));

            assertThat(problems).as("without %s", binding).containsExactly(expectedLine.get(binding.pattern().name()));
        }
    }

    @Test
    void aTopicThePrincipalMayReadButNotWriteIsNamedFromTheBrokersAnswer() throws Exception {
        List<AclBinding> documented = kafka.grantDocumentedAcls(names);
        AclBinding writeOutput = documented.stream()
                .filter(binding -> binding.pattern().name().equals(names.output())).findFirst().orElseThrow();
        kafka.revoke(List.of(writeOutput));
        // now the brokers describe the topic and list what the principal may do on it: Read, not Write
        kafka.grantRead(names.output());

        assertThat(problems(Preflight.Purpose.RUN_JOB)).containsExactly(refused("output.topic", "Write",
                "the topic '" + names.output() + "'", "--topic " + names.output()));
    }

    private static String refused(String key, String operation, String resource, String resourceArguments) {
        return key + ": the Kafka principal User:onceflow-job may not " + operation + " " + resource + " at "
                + kafka.bootstrapServers() + ". Grant it: kafka-acls.sh --bootstrap-server " + kafka.bootstrapServers()
                + " --command-config <admin client properties> --add --allow-principal User:onceflow-job --operation "
                + operation + " " + resourceArguments;
    }

    @Test
    void aWrongPasswordIsRefusedInOneLine() {
        settings.putAll(kafka.jobSettings("not-the-password"));

        assertThat(problems(Preflight.Purpose.RUN_JOB)).singleElement().asString()
                .startsWith("kafka.properties.sasl.jaas.config: the Kafka brokers at " + kafka.bootstrapServers()
                        + " refused the client's authentication")
                .doesNotContain("not-the-password");
    }

    @Test
    void aBrokerCertificateFromAnotherAuthorityIsRefused(@TempDir Path directory) {
        TestCertificates other = TestCertificates.newAuthority(directory);
        settings.put("kafka.properties.ssl.truststore.location", other.trustStore().toString());

        assertThat(problems(Preflight.Purpose.RUN_JOB)).singleElement().asString()
                .startsWith("kafka.properties.ssl.truststore: the TLS handshake with the Kafka brokers at "
                        + kafka.bootstrapServers() + " failed");
    }

    @Test
    void aBrokerReachedByANameItsCertificateDoesNotListIsRefused() {
        // the certificate names 127.0.0.1 only
        String byName = kafka.bootstrapServers().replace("127.0.0.1", "localhost");
        settings.put("kafka.bootstrap.servers", byName);

        assertThat(problems(Preflight.Purpose.RUN_JOB)).singleElement().asString()
                .startsWith("kafka.properties.ssl.truststore: the TLS handshake with the Kafka brokers at " + byName
                        + " failed");
    }

    @Test
    void aPlaintextListenerIsRefusedWhenTlsIsConfigured() {
        settings.put("kafka.bootstrap.servers", kafka.plaintextBootstrapServers());

        assertThat(problems(Preflight.Purpose.RUN_JOB)).singleElement().asString()
                .startsWith("kafka.bootstrap.servers: no Kafka broker answered at " + kafka.plaintextBootstrapServers());
    }
}
