package io.onceflow.sink.postgres.internal;

import org.apache.flink.annotation.Internal;
import java.util.Objects;

/**
 * What the writer hands to the committer for one checkpoint: a transaction that the writer has
 * prepared ({@code PREPARE TRANSACTION}) and that the committer must commit once that checkpoint
 * has completed.
 */
@Internal
public final class PostgresCommittable {
    private final TransactionId transactionId;

    public PostgresCommittable(TransactionId transactionId) {
        this.transactionId = Objects.requireNonNull(transactionId, "transactionId");
    }

    /** The prepared transaction, with the sink prefix, epoch, subtask and checkpoint it encodes. */
    public TransactionId transactionId() {
        return transactionId;
    }

    @Override
    public boolean equals(Object o) {
        return this == o || (o instanceof PostgresCommittable
                && transactionId.equals(((PostgresCommittable) o).transactionId));
    }

    @Override
    public int hashCode() {
        return transactionId.hashCode();
    }

    @Override
    public String toString() {
        return "PostgresCommittable{" + transactionId + "}";
    }
}
