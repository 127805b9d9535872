package io.onceflow.examples.ledger;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.api.Onceflow;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.sink.kafka.OnceflowHeaders;
import io.onceflow.testing.Ledger;
import io.onceflow.testing.MiniClusters;
import io.onceflow.testing.PipelineScenario;
import io.onceflow.tools.audit.AuditReport;
import io.onceflow.tools.generator.EventGenerator;
import io.onceflow.tools.generator.GeneratedInput;
import java.io.IOException;
import java.io.InputStream;
import java.math.BigDecimal;
import java.sql.Connection;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The example's job against a real broker, a real PostgreSQL and a MiniCluster (onceflow's test
 * jar): generated payments and orders with duplicates and poison, plus payments in a currency the
 * ledger does not keep. Each of those is dead-lettered once by {@link PaymentScreening}; every
 * other payment is applied once by {@code ledger.apply_payment}, so each balance is its opening
 * balance less that account's unique RUB payments, to the cent.
 */
class PaymentsLedgerTest {
    private static final BigDecimal OPENING = new BigDecimal("1000000.00");
    private static final int FOREIGN_PAYMENTS = 25;

    @RegisterExtension
    static final MiniClusterExtension FLINK = MiniClusters.fourSlots();

    @Test
    void everyPaymentIsAppliedOnceAndForeignCurrenciesAreDeadLettered() throws Exception {
        PipelineScenario scenario = new PipelineScenario("payments-ledger").withPostgres()
                .with("postgres.effect.function", "ledger.apply_payment");
        try (Connection ledger = scenario.database().connect()) {
            Ledger.install(ledger, ledgerSql());
            Ledger.openAccounts(ledger, EventGenerator.ACCOUNTS, OPENING, false);
        }
        GeneratedInput generated = scenario.produce(3_000, 5);
        Ledger.PaymentTally rubPayments = new Ledger.PaymentTally(EventGenerator.ID_HEADER);
        scenario.kafka().readCommitted(scenario.inputTopic, Duration.ofSeconds(60)).forEach(rubPayments);
        produceForeignPayments(scenario);
        OnceflowConfig config = scenario.config();

        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(
                Onceflow.flinkConfiguration(config));
        Onceflow.job(config, new PaymentScreening()).boundedAtLatestOffsets().defineIn(env);
        env.execute(scenario.name);

        Map<String, Integer> rejectedByProcessor = new HashMap<>();
        for (ConsumerRecord<byte[], byte[]> deadLetter
                : scenario.kafka().readCommitted(scenario.deadLetterTopic, Duration.ofSeconds(60))) {
            if ("REJECTED_BY_PROCESSOR".equals(header(deadLetter, OnceflowHeaders.DEAD_LETTER_REASON))) {
                rejectedByProcessor.merge(new String(deadLetter.key(), UTF_8), 1, Integer::sum);
            }
        }
        assertThat(rejectedByProcessor).hasSize(FOREIGN_PAYMENTS).allSatisfy((id, count) -> {
            assertThat(id).startsWith("usd-");
            assertThat(count).isEqualTo(1);
        });
        try (Connection ledger = scenario.database().connect()) {
            Ledger.Report report = Ledger.audit(ledger, config.postgres().orElseThrow().table());
            assertThat(report.clean()).as("ledger audit: %s", report).isTrue();
            assertThat(Ledger.balances(ledger)).isEqualTo(Ledger.expectedBalances(ledger, rubPayments.paymentsByAccount()));
        }
        AuditReport audit = scenario.audit();
        assertThat(audit.uniqueIds()).isEqualTo(generated.uniqueIds().size() + FOREIGN_PAYMENTS);
    }

    private static void produceForeignPayments(PipelineScenario scenario) {
        try (KafkaProducer<byte[], byte[]> producer = scenario.kafka().newProducer()) {
            for (int i = 0; i < FOREIGN_PAYMENTS; i++) {
                String id = "usd-" + i;
                byte[] value = ("{\"id\":\"" + id + "\",\"type\":\"payment\",\"user_id\":" + (i + 1)
                        + ",\"amount\":10.00,\"currency\":\"USD\"}").getBytes(UTF_8);
                producer.send(new ProducerRecord<>(scenario.inputTopic, null, null, id.getBytes(UTF_8), value,
                        List.of(new RecordHeader(EventGenerator.ID_HEADER, id.getBytes(UTF_8)))));
            }
        }
    }

    private static String header(ConsumerRecord<byte[], byte[]> record, String name) {
        return record.headers().lastHeader(name) == null ? null : new String(record.headers().lastHeader(name).value(), UTF_8);
    }

    private static String ledgerSql() throws IOException {
        try (InputStream sql = PaymentsLedgerTest.class.getResourceAsStream("/db/ledger.sql")) {
            return new String(sql.readAllBytes(), UTF_8);
        }
    }
}
