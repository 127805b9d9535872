package io.onceflow.sink.postgres.internal;

import java.sql.Connection;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;

/**
 * Internal. Whether the server an {@link EffectWorker} connects to is still the one its run was
 * registered on ({@link ServerChange}: the signs every worker and writer of the run sees, at any
 * restart of it, until a new submission records the new server), and, for a worker that connected
 * before, the one it applied effects on, with all it had: the first server's identity, and the
 * newest transaction the worker committed effects in (a copy of the same timeline that lost this
 * worker's commits). After a failover to a replica that was behind (or a restored copy), effects whose commit
 * was acknowledged but lost are queued again, and applying them again could give another outcome than
 * the one the function returned before (another balance, a rejection); docs/failover.md, "Effects after
 * a failover".
 */
final class EffectServerWatch {
    private final PostgresSinkConfig config;
    private ServerIdentity first;
    private long committedTransactionId = -1;

    EffectServerWatch(PostgresSinkConfig config) {
        this.config = config;
    }

    /** The worker committed effects in transaction {@code transactionId} (-1: none). */
    void committed(long transactionId) {
        committedTransactionId = Math.max(committedTransactionId, transactionId);
    }

    /**
     * Reads the identity of the server {@code session} talks to: the signs that it changed since the
     * run was registered (none without a run: the at-least-once sink has none) or under this worker
     * (the first one is the worker's), empty if none.
     */
    List<String> changes(Connection session) throws SQLException {
        ServerIdentity server = ServerIdentity.read(session);
        List<String> signs = config.run() == PostgresSinkConfig.NO_RUN ? new ArrayList<>()
                : ServerChange.sinceRun(session, config, server);
        if (first == null) {
            first = server;
            return signs;
        }
        ServerIdentity seen = new ServerIdentity(first.systemIdentifier(), first.timeline(),
                Math.max(first.nextXid(), committedTransactionId + 1));
        signs.addAll(server.changesSince(seen, "the server this worker applied effects on"));
        return signs;
    }
}
