package io.onceflow.sink.postgres.internal;

import io.onceflow.sink.postgres.options.StartMode;
import java.util.Optional;

/**
 * A fresh start ({@link StartMode#FRESH}) was refused because the sink prefix has prepared
 * transactions from an earlier run: the safe way on is to resume from that run's latest retained
 * checkpoint (whose committables commit them), or to start with
 * {@link StartMode#FRESH_DISCARDING_PENDING} knowing that their output is lost.
 */
public final class PendingTransactionsException extends IllegalStateException {
    private static final long serialVersionUID = 1L;

    private final int preparedTransactions;
    private final String previousJobId;

    public PendingTransactionsException(String message, int preparedTransactions, String previousJobId) {
        super(message);
        this.preparedTransactions = preparedTransactions;
        this.previousJobId = previousJobId;
    }

    /** How many transactions of the prefix are prepared. */
    public int preparedTransactions() {
        return preparedTransactions;
    }

    /** The Flink job id of the newest writers of the prefix, where its checkpoints are; empty if unknown. */
    public Optional<String> previousJobId() {
        return Optional.ofNullable(previousJobId);
    }
}
