package io.onceflow.job;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.config.OnceflowConfig;
import io.onceflow.testing.FailureInjector;
import io.onceflow.testing.Ledger;
import io.onceflow.testing.MiniClusters;
import io.onceflow.testing.PipelineScenario;
import io.onceflow.tools.generator.EventGenerator;
import io.onceflow.tools.generator.GeneratedInput;
import java.math.BigDecimal;
import java.sql.Connection;
import java.time.Duration;
import java.util.Map;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Business effects exactly once: the PostgreSQL sink applies each payment to a ledger through an
 * effect function ({@link Ledger}), with a failure injected at each point of the checkpoint
 * protocol. Besides every id exactly once in each output ({@link ExactlyOnceIT#assertExactlyOnce}),
 * every account's balance must equal its opening balance less its unique payments, computed from
 * the input topic itself, to the cent. No payment can be short of funds here, so the expected
 * balances do not depend on the order payments meet; payments to the missing accounts are rejected.
 */
class LedgerEffectIT {
    private static final long RECORDS = 6_000;
    private static final BigDecimal PLENTY = new BigDecimal("1000000.00");

    @RegisterExtension
    static final MiniClusterExtension FLINK = MiniClusters.fourSlots();

    @ParameterizedTest
    @EnumSource(FailureInjector.Moment.class)
    void everyPaymentIsAppliedOnceDespiteAFailure(FailureInjector.Moment moment) throws Exception {
        PipelineScenario scenario = PipelineScenario.failingAt("ledger", moment)
                .withPostgres()
                .with("postgres.effect.function", Ledger.FUNCTION).with("postgres.effect.keys", Ledger.KEYS);
        scenario.withEffectResults(); // the audit reads it back: every payment's outcome once, in order
        boolean beforeFirst = moment == FailureInjector.Moment.BEFORE_FIRST_CHECKPOINT;
        try (Connection ledger = scenario.database().connect()) {
            Ledger.install(ledger);
            Ledger.openAccounts(ledger, EventGenerator.ACCOUNTS, PLENTY, false);
        }
        GeneratedInput truth = scenario.produce(RECORDS, 11);
        OnceflowConfig config = scenario.config();

        FailureInjector failure = new FailureInjector(scenario.name, moment, beforeFirst ? 50 : RECORDS / 3).pacedAt(500);
        ExactlyOnceIT.boundedJob(config, failure).execute(scenario.name);

        assertThat(FailureInjector.fired(scenario.name)).as("the injected failure happened").isTrue();
        ExactlyOnceIT.assertExactlyOnce(scenario, truth);
        assertThat(scenario.audit().resultsPublished()).as("outcomes published").isEqualTo(truth.uniqueIds().size());
        Ledger.PaymentTally tally = new Ledger.PaymentTally(EventGenerator.ID_HEADER);
        scenario.kafka().readCommitted(scenario.inputTopic, Duration.ofSeconds(60)).forEach(tally);
        Map<Long, BigDecimal> payments = tally.paymentsByAccount();
        try (Connection ledger = scenario.database().connect()) {
            Ledger.Report report = Ledger.audit(ledger, config.postgres().orElseThrow().table());
            assertThat(report.clean()).as("ledger audit: %s", report).isTrue();
            // two writer subtasks commit each checkpoint moments apart: still each partition's order
            assertThat(report.outOfOrder).as("payments posted out of their partition's offset order").isEmpty();
            assertThat(Ledger.balances(ledger))
                    .as("balances against the input's unique payments")
                    .isEqualTo(Ledger.expectedBalances(ledger, payments));
            long toMissingAccounts = payments.keySet().stream().filter(account -> account % Ledger.UNKNOWN_EVERY == 0)
                    .count();
            assertThat(toMissingAccounts).as("the input pays some missing accounts").isPositive();
            assertThat(report.paymentsByOutcome).containsKey("rejected: unknown account")
                    .doesNotContainKey("rejected: insufficient funds");
        }
    }
}
