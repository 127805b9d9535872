package io.onceflow.sink.postgres.internal;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.postgresql.core.BaseStatement;
import org.postgresql.core.QueryExecutor;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Keeps a writer's lease: renews its session's activity every third of the lease, from a daemon
 * thread, so that the session never looks idle for longer than the lease while the writer lives. A
 * holder whose session has been idle longer is presumed dead or paused (see
 * {@link LockHolder#leaseExpired}, and {@link WriterClaim} for what relies on it).
 */
final class LeaseKeeper implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(LeaseKeeper.class);

    private final Connection connection;
    private final FenceHooks hooks;
    private final ScheduledExecutorService renewer;

    /** Starts renewing the lease of {@code connection}'s session. */
    LeaseKeeper(Connection connection, Duration lease, FenceHooks hooks) {
        this.connection = connection;
        this.hooks = hooks;
        this.renewer = Executors.newSingleThreadScheduledExecutor(runnable -> {
            Thread thread = new Thread(runnable, "onceflow PostgreSQL sink writer " + hooks.subtaskIndex() + " lease");
            thread.setDaemon(true);
            return thread;
        });
        long renewMillis = Math.max(1, lease.toMillis() / 3);
        renewer.scheduleWithFixedDelay(this::renewLease, renewMillis, renewMillis, TimeUnit.MILLISECONDS);
    }

    /** A query that starts no transaction, so an idle writer does not hold a snapshot open. */
    private void renewLease() {
        hooks.reached(ProtocolHooks.Step.LEASE_RENEWAL);
        try (Statement statement = connection.createStatement()) {
            statement.unwrap(BaseStatement.class).executeWithFlags("SELECT 1", QueryExecutor.QUERY_SUPPRESS_BEGIN);
        } catch (SQLException | RuntimeException e) {
            // The writer's own next statement reports a broken connection.
            LOG.debug("Renewing the lease of PostgreSQL sink writer {} failed", hooks.subtaskIndex(), e);
        }
    }

    /** Stops renewing the lease. */
    @Override
    public void close() {
        renewer.shutdownNow();
        try {
            renewer.awaitTermination(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
