package io.onceflow.sink.postgres.internal.effects;

import io.onceflow.sink.postgres.internal.schema.ServerIdentity;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.List;

/**
 * Internal. Whether the server an {@link EffectWorker} connects to is still the one it applied effects
 * on, or has all it had: the first server's identity, and the newest transaction the worker committed
 * effects in. After a failover to a replica that was behind (or a restored copy), effects whose commit
 * was acknowledged but lost are queued again, and applying them again could give another outcome than
 * the one the function returned before (another balance, a rejection); docs/failover.md, "Effects after
 * a failover".
 */
final class EffectServerWatch {
    private ServerIdentity first;
    private long committedTransactionId = -1;

    /** The worker committed effects in transaction {@code transactionId} (-1: none). */
    void committed(long transactionId) {
        committedTransactionId = Math.max(committedTransactionId, transactionId);
    }

    /**
     * Reads the identity of the server {@code session} talks to: the first one is the worker's; for
     * the others, the signs that the server changed under the worker, empty if none.
     */
    List<String> changes(Connection session) throws SQLException {
        ServerIdentity server = ServerIdentity.read(session);
        if (first == null) {
            first = server;
            return List.of();
        }
        ServerIdentity seen = new ServerIdentity(first.systemIdentifier(), first.timeline(),
                Math.max(first.nextXid(), committedTransactionId + 1));
        return server.changesSince(seen, "the server this worker applied effects on");
    }
}
