package io.onceflow.examples.ledger;

import io.onceflow.api.Onceflow;

/**
 * The team's job: onceflow's configuration, checks and wiring, with {@link PaymentScreening} as
 * its processor. Submit it as onceflow's job jar is submitted ({@code flink run ... --config
 * job.properties}), with {@code postgres.effect.function = ledger.apply_payment} and the ledger's
 * schema ({@code db/ledger.sql}) installed in the database.
 */
public final class PaymentsLedgerJob {
    private PaymentsLedgerJob() {}

    public static void main(String[] args) throws Exception {
        Onceflow.run(args, new PaymentScreening());
    }
}
