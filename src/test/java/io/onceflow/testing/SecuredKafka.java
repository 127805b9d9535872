package io.onceflow.testing;

import io.onceflow.testing.cluster.KafkaBrokerProcess;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.flink.util.FileUtils;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;

/**
 * A Kafka broker as a payments team runs it: a {@code SASL_SSL} listener with a certificate from a
 * fresh {@link TestCertificates} authority, SCRAM-SHA-512 logins and the standard authorizer (nothing
 * is allowed that no ACL grants), in a JVM of its own ({@link KafkaBrokerProcess#startSecured}). The
 * job logs in as {@value #JOB_USER}, which has no permission until {@link #grantDocumentedAcls} gives
 * it exactly the block of docs/security.md, read from the page so that the page and the tests cannot
 * drift apart. The test administers through the plaintext listener, whose anonymous user is the super
 * user. One per JVM ({@link #shared()}), as the tests using it take their own topics and names.
 */
public final class SecuredKafka implements AutoCloseable {
    /** The principal docs/security.md grants to. */
    public static final String JOB_USER = "onceflow-job";
    private static final Path GUIDE = Path.of("docs", "security.md");
    private static final String MARKER = "<!-- DocumentedAcls (SecuredKafkaPreflightIT, SecuredPipelineIT) applies the block below -->";
    private static final Pattern BLOCK = Pattern.compile(Pattern.quote(MARKER) + "\\s*```bash\\n(.*?)```", Pattern.DOTALL);
    private static final Pattern OPTION = Pattern.compile("--([a-z-]+)(?: ([^ -][^ ]*))?");
    private static final Duration ACL_VISIBLE = Duration.ofSeconds(30);

    private static SecuredKafka shared;

    private final TestCertificates authority;
    private final KafkaBrokerProcess broker;
    private final String jobPassword = "job-" + Long.toHexString(Double.doubleToLongBits(Math.random()));

    private SecuredKafka(TestCertificates authority, KafkaBrokerProcess broker) {
        this.authority = authority;
        this.broker = broker;
    }

    /** The broker of this JVM, started on first call; stopped and deleted when the JVM exits. */
    public static synchronized SecuredKafka shared() {
        if (shared == null) {
            Path directory;
            try {
                directory = Files.createTempDirectory("onceflow-secured-kafka");
            } catch (IOException e) {
                throw new IllegalStateException("could not create a directory for the secured broker", e);
            }
            shared = start(directory);
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                shared.close();
                FileUtils.deleteDirectoryQuietly(directory.toFile());
            }, "secured-kafka-shutdown"));
        }
        return shared;
    }

    /**
     * Starts the broker in {@code directory}; its certificate names only {@code 127.0.0.1}, the address
     * every client is given, so that a client connecting by another name fails host name verification.
     */
    public static SecuredKafka start(Path directory) {
        TestCertificates authority = TestCertificates.newAuthority(directory.resolve("tls"));
        TestCertificates.ServerCertificate certificate = authority.issueServerCertificate("kafka", "ip:127.0.0.1");
        KafkaBrokerProcess broker = KafkaBrokerProcess.startSecured(directory.resolve("kafka"),
                Path.of("flink-conf", "log4j.properties").toAbsolutePath(), certificate);
        SecuredKafka kafka = new SecuredKafka(authority, broker);
        broker.addScramUser(JOB_USER, kafka.jobPassword);
        return kafka;
    }

    /** The {@code SASL_SSL} listener. */
    public String bootstrapServers() {
        return broker.saslSslBootstrapServers();
    }

    /** The plaintext listener, the super user's: what a job configured for TLS must not be pointed at. */
    public String plaintextBootstrapServers() {
        return broker.bootstrapServers();
    }

    /** The password of {@value #JOB_USER}. */
    public String jobPassword() {
        return jobPassword;
    }

    /**
     * The job's Kafka settings, as docs/security.md shows them: SCRAM over TLS, trusting the test
     * authority (here through a PKCS#12 trust store, whose password is a secret setting too).
     */
    public Map<String, String> jobSettings(String password) {
        Map<String, String> settings = new HashMap<>();
        settings.put("kafka.bootstrap.servers", bootstrapServers());
        settings.put("kafka.properties.security.protocol", "SASL_SSL");
        settings.put("kafka.properties.sasl.mechanism", "SCRAM-SHA-512");
        settings.put("kafka.properties.sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule"
                + " required username=\"" + JOB_USER + "\" password=\"" + password + "\";");
        settings.put("kafka.properties.ssl.truststore.location", authority.trustStore().toString());
        settings.put("kafka.properties.ssl.truststore.type", "PKCS12");
        settings.put("kafka.properties.ssl.truststore.password", TestCertificates.STORE_PASSWORD);
        return settings;
    }

    /**
     * A job of the test's own: a unique input, output and dead-letter topic (created, 2 partitions
     * each), group and transactional id prefix, so that tests share the broker, never names or ACLs.
     */
    public JobNames newJob() {
        String suffix = UUID.randomUUID().toString().substring(0, 8);
        JobNames names = new JobNames("in-" + suffix, "out-" + suffix, "dlq-" + suffix, "group-" + suffix,
                "prefix-" + suffix);
        createTopics(2, names.input(), names.output(), names.deadLetter());
        return names;
    }

    /** {@link #jobSettings(String)} with {@code names}' topics, group and prefix: every required key. */
    public Map<String, String> jobSettings(JobNames names, String password) {
        Map<String, String> settings = jobSettings(password);
        settings.putAll(Map.of("input.topics", names.input(), "output.topic", names.output(),
                "dead.letter.topic", names.deadLetter(), "input.group.id", names.group(),
                "kafka.transactional.id.prefix", names.transactionalIdPrefix()));
        return settings;
    }

    /** The super user's admin client. */
    public Admin admin() {
        return broker.admin();
    }

    public void createTopics(int partitions, String... topics) {
        for (String topic : topics) {
            broker.createTopic(topic, partitions);
        }
    }

    /** The names of a test's job, in place of the page's example names. */
    public record JobNames(String input, String output, String deadLetter, String group, String transactionalIdPrefix) {
        private String replacing(String pageName) {
            return switch (pageName) {
                case "payments" -> input;
                case "payments-deduplicated" -> output;
                case "payments-dead-letters" -> deadLetter;
                default -> throw new IllegalStateException("docs/security.md names an unknown resource " + pageName);
            };
        }
    }

    /**
     * Grants {@value #JOB_USER} the ACLs of docs/security.md's block for {@code names}, and waits until
     * the broker enforces them.
     *
     * @return the bindings, in the page's order
     */
    public List<AclBinding> grantDocumentedAcls(JobNames names) throws IOException {
        List<AclBinding> bindings = documentedAcls(names);
        grant(bindings);
        return bindings;
    }

    /** Creates the bindings and waits until the broker lists them. */
    public void grant(Collection<AclBinding> bindings) {
        try (Admin admin = admin()) {
            admin.createAcls(bindings).all().get(30, TimeUnit.SECONDS);
            awaitListed(admin, bindings, true);
        } catch (Exception e) {
            throw new IllegalStateException("could not grant " + bindings, e);
        }
    }

    /** Deletes the bindings and waits until the broker no longer lists them. */
    public void revoke(Collection<AclBinding> bindings) {
        try (Admin admin = admin()) {
            admin.deleteAcls(bindings.stream().map(AclBinding::toFilter).toList()).all().get(30, TimeUnit.SECONDS);
            awaitListed(admin, bindings, false);
        } catch (Exception e) {
            throw new IllegalStateException("could not revoke " + bindings, e);
        }
    }

    private static void awaitListed(Admin admin, Collection<AclBinding> bindings, boolean listed) throws Exception {
        boolean done = Eventually.holdsWithin(ACL_VISIBLE, Duration.ofMillis(100), () -> {
            Collection<AclBinding> present = admin.describeAcls(AclBindingFilter.ANY).values().get(10, TimeUnit.SECONDS);
            return bindings.stream().allMatch(binding -> present.contains(binding) == listed);
        });
        if (!done) {
            throw new IllegalStateException("the broker did not " + (listed ? "list " : "drop ") + bindings + " within "
                    + ACL_VISIBLE);
        }
    }

    /** The page's block, one binding per {@code kafka-acls.sh} line. */
    private static List<AclBinding> documentedAcls(JobNames names) throws IOException {
        Matcher block = BLOCK.matcher(Files.readString(GUIDE));
        if (!block.find()) {
            throw new IllegalStateException(GUIDE + " has no ACL block after " + MARKER);
        }
        List<AclBinding> bindings = new ArrayList<>();
        for (String line : block.group(1).strip().split("\n")) {
            Map<String, String> options = new HashMap<>();
            Matcher option = OPTION.matcher(line);
            while (option.find()) {
                options.put(option.group(1), option.group(2));
            }
            ResourcePattern resource;
            PatternType pattern = "prefixed".equals(options.get("resource-pattern-type"))
                    ? PatternType.PREFIXED : PatternType.LITERAL;
            if (options.containsKey("topic")) {
                resource = new ResourcePattern(ResourceType.TOPIC, names.replacing(options.get("topic")), pattern);
            } else if (options.containsKey("group")) {
                resource = new ResourcePattern(ResourceType.GROUP, names.group(), pattern);
            } else {
                resource = new ResourcePattern(ResourceType.TRANSACTIONAL_ID, names.transactionalIdPrefix(), pattern);
            }
            bindings.add(new AclBinding(resource, new AccessControlEntry(options.get("allow-principal"), "*",
                    AclOperation.fromString(options.get("operation")), AclPermissionType.ALLOW)));
        }
        return bindings;
    }

    /** Grants {@value #JOB_USER} Read on {@code topics}: what the audit needs beyond the job's ACLs. */
    public void grantRead(String... topics) {
        List<AclBinding> bindings = new ArrayList<>();
        for (String topic : topics) {
            bindings.add(new AclBinding(new ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
                    new AccessControlEntry("User:" + JOB_USER, "*", AclOperation.READ, AclPermissionType.ALLOW)));
        }
        grant(bindings);
    }

    @Override
    public void close() {
        broker.close();
    }
}
