package io.onceflow.examples.ledger;

import io.onceflow.job.Onceflow;

/**
 * The team's job: onceflow's configuration, checks and wiring, with {@link PaymentScreening} as
 * its processor. The main class of the shaded jar: {@code flink run -d
 * target/payments-ledger-<version>-job.jar --config job.properties}, with the ledger's schema
 * ({@code db/ledger.sql}) and the job role's grants ({@code db/grants.sql}) in the database.
 */
public final class PaymentsLedgerJob {
    private PaymentsLedgerJob() {}

    public static void main(String[] args) throws Exception {
        Onceflow.run(args, new PaymentScreening());
    }
}
