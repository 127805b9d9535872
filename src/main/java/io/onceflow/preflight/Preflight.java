package io.onceflow.preflight;

import io.onceflow.cli.CannotRunException;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.config.Secrets;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import org.apache.flink.annotation.Internal;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Checks, before a job graph is built or an audit reads anything, that the services the
 * configuration names can be used: the Kafka brokers answer, the topics exist, the brokers allow
 * the job's transactions, PostgreSQL accepts the login and the user may create or write the
 * tables. Each check has a short timeout, so that a wrong address fails in seconds instead of a
 * job that retries forever; each problem is one line naming the key, the host and the fix.
 *
 * <p>The checks run where the command's main method runs: for {@code flink run} on the client, for
 * a REST submission on the JobManager. A preflight that passes there proves nothing about the
 * TaskManagers' network, but a wrong address or a missing topic is caught before anything starts.
 */
@Internal
public final class Preflight {
    /** How long each service may take to answer; together well under the 30 s a user waits. */
    static final Duration SERVICE_TIMEOUT = Duration.ofSeconds(10);
    private static final Logger LOG = LoggerFactory.getLogger(Preflight.class);

    /** What the checked configuration is used for, which decides what it needs. */
    public enum Purpose {
        /** The job reads, writes in transactions, and creates its tables if missing. */
        RUN_JOB,
        /** The audit reads the topics and the table. */
        AUDIT
    }

    private Preflight() {}

    /**
     * What a passed check found out that the job needs.
     *
     * @param kafkaTransactionTimeout the sinks' Kafka transaction timeout: {@code kafka.transaction.timeout}, or
     *     without it the brokers' transaction.max.timeout.ms ({@link OnceflowConfig#kafkaTransactionTimeout(Optional)})
     * @param notes lines to show the operator, e.g. how long an outage the output survives
     */
    public record Result(Duration kafkaTransactionTimeout, List<String> notes) {
        public Result {
            notes = List.copyOf(notes);
        }
    }

    /**
     * Runs every check that applies to {@code purpose}.
     *
     * @param config a validated configuration
     * @param purpose what it is used for
     * @return the Kafka transaction timeout to use, and what to tell the operator (also logged)
     * @throws CannotRunException listing every problem found, one line each
     */
    public static Result check(OnceflowConfig config, Purpose purpose) {
        // a check of unreachable services takes seconds: say what is being waited for
        LOG.info("Checking the Kafka brokers at {}{}, at most {} s each", config.bootstrapServers(),
                config.postgres().map(postgres -> " and PostgreSQL at "
                        + new PostgresPreflight(postgres, purpose).server()).orElse(""),
                SERVICE_TIMEOUT.toSeconds());
        KafkaPreflight kafka = new KafkaPreflight(config, purpose);
        List<String> problems = new ArrayList<>(kafka.problems());
        config.postgres().ifPresent(postgres -> problems.addAll(new PostgresPreflight(postgres, purpose).problems()));
        if (!problems.isEmpty()) {
            throw new CannotRunException(problems.stream().map(problem -> withoutSecrets(oneLine(problem), config)).toList());
        }
        Optional<Duration> brokersMaximum = kafka.brokersTransactionMaxTimeout();
        List<String> notes = new ArrayList<>();
        if (purpose == Purpose.RUN_JOB && config.deliveryGuarantee() == DeliveryGuarantee.EXACTLY_ONCE) {
            String outage = config.kafkaOutageSurvivedLine(brokersMaximum);
            if (config.kafkaOutageSurvived(brokersMaximum).compareTo(OnceflowConfig.SHORTEST_OUTAGE_TO_SURVIVE) < 0) {
                outage += " (accepted: kafka.transaction.timeout.accept.loss.after.short.outage=true)";
                LOG.warn(outage);
            } else {
                LOG.info(outage);
            }
            notes.add(outage);
        }
        return new Result(config.kafkaTransactionTimeout(brokersMaximum), notes);
    }

    /**
     * Describes in one line a failure of the job's PostgreSQL precondition check, which runs after
     * this preflight (e.g. too few prepared transactions allowed, or a table that cannot be
     * created), naming the server.
     *
     * @param config the configuration the check ran with; it has PostgreSQL settings
     * @param failure what the check threw: an {@link java.sql.SQLException} or an {@link
     *     IllegalStateException} whose message says what to change
     * @return the exception to throw
     */
    public static CannotRunException postgresFailure(OnceflowConfig config, Exception failure) {
        PostgresPreflight postgres = new PostgresPreflight(config.postgres().orElseThrow(), Purpose.RUN_JOB);
        String problem = failure instanceof java.sql.SQLException sqlFailure
                ? postgres.connectionProblem(sqlFailure, "")
                : "postgres.url: PostgreSQL at " + postgres.server() + ": " + failure.getMessage();
        return new CannotRunException(List.of(withoutSecrets(oneLine(problem), config)));
    }

    /**
     * The time since {@code startNanos}, as a message says it ("1.2 s"): what a check really took,
     * which for an unknown host is far less than its timeout.
     *
     * @param startNanos a {@link System#nanoTime} reading
     * @return the seconds elapsed since, with one decimal
     */
    public static String secondsSince(long startNanos) {
        return String.format(Locale.ROOT, "%.1f s", (System.nanoTime() - startNanos) / 1e9);
    }

    /**
     * Tells whether {@code host} is this machine: {@code localhost} or a literal loopback address. A
     * name is never looked up: a name is what production uses, and the warnings about unencrypted
     * connections are for production.
     *
     * @param host a host name or literal address, without brackets or port
     */
    static boolean isLoopbackHost(String host) {
        if (host.equalsIgnoreCase("localhost")) {
            return true;
        }
        if (!host.matches("[0-9.]+|[0-9a-fA-F:]*:[0-9a-fA-F:.]*")) {
            return false;
        }
        try {
            return InetAddress.getByName(host).isLoopbackAddress();
        } catch (UnknownHostException e) {
            return false;
        }
    }

    /**
     * Joins the lines of a message (a driver's may span several), as a problem is one line.
     *
     * @param text any text
     * @return the text with each line break and the blanks around it replaced by one space
     */
    public static String oneLine(String text) {
        return text.replaceAll("\\s*\\R\\s*", " ");
    }

    /**
     * Replaces every secret value of {@code config} in {@code text} by {@link Secrets#REDACTED}: the
     * problems quote messages of the Kafka client and the JDBC driver, whose wording is not ours.
     *
     * @param text a message to show
     * @param config the configuration whose secrets must not be shown
     * @return the message with every secret value redacted
     */
    public static String withoutSecrets(String text, OnceflowConfig config) {
        String redacted = text;
        for (String secret : config.secretValues()) {
            redacted = redacted.replace(secret, Secrets.REDACTED);
        }
        return redacted;
    }
}
