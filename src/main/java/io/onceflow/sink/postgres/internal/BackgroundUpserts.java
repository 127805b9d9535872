package io.onceflow.sink.postgres.internal;

import io.onceflow.api.Event;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import org.apache.flink.annotation.Internal;

/**
 * Internal. Fills a writer's {@link EventUpsertBatch} and executes each full batch's upsert on one
 * background thread, in submission order, on the writer's single connection, so that the task
 * thread fills the next batch while PostgreSQL (another process, another core) executes the
 * previous one. Without it the task thread idled for every batch's round trip (about half of the
 * exactly-once task thread's samples in jstack, docs/benchmarks.md).
 *
 * <p>One thread and one connection keep the statements ordered inside the writer's transaction.
 * At most {@code maxInFlight} upserts are queued or running: {@link #submit} blocks beyond that,
 * which is the sink's back-pressure. The first failure is kept and reported by every later call
 * ({@link #add}, {@link #flush}, {@link #submit}, {@link #awaitAll}), and the upserts queued behind
 * it are skipped (a failed statement has aborted the transaction anyway). It only executes upserts:
 * whatever ends the checkpoint's transaction (PREPARE) stays with the writer, after {@link #flush}.
 * (An at-least-once batch with an effect is a transaction of its own, see {@link EventUpsertBatch}.)
 *
 * <p>The connection belongs to the background thread from {@link #submit} until {@link #flush} or
 * {@link #awaitAll} returns; the writer must not use it in between.
 */
@Internal
public final class BackgroundUpserts implements AutoCloseable {
    /** One upsert runs while the next batch fills and, at most, one more waits. */
    public static final int MAX_IN_FLIGHT = 2;

    private final EventUpsertBatch batch;
    private final Connection connection;
    private final String writerName;
    private final int maxInFlight;
    private final Semaphore freeSlots;
    private final ExecutorService thread;
    private volatile Throwable failure;

    /**
     * @param writerName for error messages and the thread's name, e.g. {@code PostgreSQL sink writer 3}
     * @param maxInFlight upserts queued or running at most
     */
    public BackgroundUpserts(EventUpsertBatch batch, Connection connection, String writerName, int maxInFlight) {
        if (maxInFlight < 1) {
            throw new IllegalArgumentException("maxInFlight must be at least 1, was " + maxInFlight);
        }
        this.batch = batch;
        this.connection = connection;
        this.writerName = writerName;
        this.maxInFlight = maxInFlight;
        this.freeSlots = new Semaphore(maxInFlight);
        this.thread = Executors.newSingleThreadExecutor(runnable -> {
            Thread worker = new Thread(runnable, "onceflow " + writerName + " upserts");
            worker.setDaemon(true);
            return worker;
        });
    }

    /** Adds {@code event} to the batch and queues the batch's upsert when it is full. */
    public void add(Event event) throws IOException {
        throwIfFailed();
        if (batch.add(event)) {
            submit(batch.take());
        }
    }

    /** Queues the rest of the batch and waits until every upsert so far has been executed. */
    public void flush() throws IOException {
        if (!batch.isEmpty()) {
            submit(batch.take());
        }
        awaitAll();
    }

    /** Queues {@code upsert}; waits while {@code maxInFlight} are queued or running. */
    public void submit(EventUpsertBatch.Upsert upsert) throws IOException {
        throwIfFailed();
        acquire(1);
        thread.execute(() -> {
            try {
                if (failure == null) {
                    upsert.executeOn(connection);
                }
            } catch (Throwable t) { // an Error too: the task must fail, not lose rows silently
                failure = t;
            } finally {
                freeSlots.release();
            }
        });
    }

    /** Fails with the first background failure, if there was one. */
    public void throwIfFailed() throws IOException {
        Throwable failed = failure;
        if (failed != null) {
            throw new IOException(writerName + " could not write a batch", failed);
        }
    }

    /** Waits until every submitted upsert has been executed, then fails if any of them failed. */
    public void awaitAll() throws IOException {
        acquire(maxInFlight);
        freeSlots.release(maxInFlight);
        throwIfFailed();
    }

    private void acquire(int slots) throws IOException {
        try {
            freeSlots.acquire(slots);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new InterruptedIOException(writerName + " was interrupted waiting for its upserts");
        }
    }

    /**
     * Drops the queued upserts and stops the thread. A running upsert is aborted by closing the
     * connection under it (JDBC's {@code abort}: close() would wait for the statement). Without a
     * prepared transaction PostgreSQL rolls back what the connection wrote; the writer closes the
     * connection after this.
     */
    @Override
    public void close() throws SQLException {
        thread.shutdownNow();
        try {
            if (!thread.awaitTermination(100, TimeUnit.MILLISECONDS)) {
                connection.abort(Runnable::run);
                thread.awaitTermination(10, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
