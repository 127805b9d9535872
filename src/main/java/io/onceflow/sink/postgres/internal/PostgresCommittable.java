package io.onceflow.sink.postgres.internal;

import org.apache.flink.annotation.Internal;
import java.util.Objects;

/**
 * What the writer hands to the committer for one checkpoint: a transaction that the writer has
 * prepared ({@code PREPARE TRANSACTION}) and that the committer must commit once that checkpoint
 * has completed.
 *
 * @param transactionId the prepared transaction, with the sink prefix, epoch, subtask and checkpoint it encodes
 */
@Internal
public record PostgresCommittable(TransactionId transactionId) {
    public PostgresCommittable {
        Objects.requireNonNull(transactionId, "transactionId");
    }
}
