package io.onceflow.sink.kafka;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.flink.annotation.Internal;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListTransactionsOptions;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Lists and aborts the Kafka transactions of a job's sinks (see {@link KafkaSinks}) that are
 * neither committed nor aborted: an earlier run's output that a fresh start would abort, and what
 * dead attempts left open ({@link LeftoverTransactions}).
 */
@Internal
public final class PendingKafkaTransactions {
    /** Kafka transaction states of a transaction that is neither committed nor aborted. */
    private static final List<TransactionState> PENDING_STATES =
            List.of(TransactionState.ONGOING, TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT);
    private static final long KAFKA_TIMEOUT_MS = 15_000;

    private PendingKafkaTransactions() {}

    /**
     * The transactional ids of the sinks with {@code transactionalIdPrefix} whose transaction is
     * pending, sorted.
     *
     * @param clientProperties pass-through client settings (security.protocol, sasl.*, ssl.*)
     * @throws ExecutionException when the brokers refuse the listing
     * @throws TimeoutException when they do not answer within 15 s
     */
    public static List<String> list(String bootstrapServers, Properties clientProperties, String transactionalIdPrefix)
            throws ExecutionException, TimeoutException {
        return list(bootstrapServers, clientProperties, PENDING_STATES,
                KafkaSinks.transactionalIdPrefixes(transactionalIdPrefix));
    }

    /** The transactional ids of one sink ({@code sinkPrefix}) whose transaction is open, sorted. */
    static List<String> ongoing(String bootstrapServers, Properties clientProperties, String sinkPrefix)
            throws ExecutionException, TimeoutException {
        return list(bootstrapServers, clientProperties, List.of(TransactionState.ONGOING), List.of(sinkPrefix));
    }

    /**
     * Aborts the open transactions of {@code transactionalIds}, as the brokers do when they outlive
     * their timeout: a producer's {@code initTransactions} aborts what an earlier producer with its
     * transactional id left open, and fences that producer.
     *
     * @param clientProperties pass-through client settings (security.protocol, sasl.*, ssl.*)
     */
    public static void abort(String bootstrapServers, Properties clientProperties, List<String> transactionalIds) {
        for (String transactionalId : transactionalIds) {
            Properties properties = new Properties();
            properties.putAll(clientProperties);
            properties.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers);
            properties.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
            try (KafkaProducer<byte[], byte[]> producer =
                    new KafkaProducer<>(properties, new ByteArraySerializer(), new ByteArraySerializer())) {
                producer.initTransactions();
            }
        }
    }

    private static List<String> list(String bootstrapServers, Properties clientProperties,
            List<TransactionState> states, List<String> sinkPrefixes) throws ExecutionException, TimeoutException {
        Properties properties = new Properties();
        properties.putAll(clientProperties);
        properties.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers);
        properties.putIfAbsent(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, (int) KAFKA_TIMEOUT_MS);
        properties.putIfAbsent(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, (int) KAFKA_TIMEOUT_MS);
        try (Admin admin = Admin.create(properties)) {
            List<String> pending = new ArrayList<>();
            for (TransactionListing transaction : admin.listTransactions(new ListTransactionsOptions().filterStates(states))
                    .all().get(KAFKA_TIMEOUT_MS, TimeUnit.MILLISECONDS)) {
                String id = transaction.transactionalId();
                // exactly this job's names: not those of a job whose prefix starts with this one's
                if (sinkPrefixes.stream().anyMatch(prefix -> TransactionName.parse(prefix, id).isPresent())) {
                    pending.add(id);
                }
            }
            pending.sort(Comparator.naturalOrder());
            return pending;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while listing Kafka transactions", e);
        }
    }
}
