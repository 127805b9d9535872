package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.ProtocolHooks;
import io.onceflow.sink.postgres.internal.TransactionId;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * One writer attempt of {@link FencingScheduleTest}, as a task of a TaskManager: its writer and its
 * committer's calls run on a thread of its own, one operation at a time, in the order the schedule
 * hands them over. It can be frozen, as SIGSTOP freezes a TaskManager: at a protocol step
 * ({@link ProtocolHooks}) that its own thread reaches, or between operations; frozen, its lease
 * keeper stops renewing too. Waking it lets the step go on.
 */
final class ScheduledAttempt {
    /** How an operation handed to an attempt ended, as far as the schedule waits for it. */
    enum Result { DONE, FAILED, FROZE }

    final String name;
    private final ExecutorService thread;
    private volatile ProtocolHooks.Step freezeAt;
    private volatile CountDownLatch frozen;
    private volatile CountDownLatch reachedFreeze = new CountDownLatch(1);
    private Future<?> running;
    Throwable failure;

    ScheduledAttempt(String name) {
        this.name = name;
        this.thread = Executors.newSingleThreadExecutor(runnable -> {
            Thread t = new Thread(runnable, name);
            t.setDaemon(true);
            return t;
        });
    }

    /**
     * {@code config} with this attempt's hook, which every step of the writers and committers made
     * with it passes (its lease keeper's renewals too): freezes the attempt that reaches its armed
     * step, or is frozen.
     */
    PostgresSinkConfig sink(PostgresSinkConfig config) {
        return config.withHook(this::reached);
    }

    private void reached(ProtocolHooks.Step step, TransactionId transaction) throws InterruptedException {
        if (step != ProtocolHooks.Step.LEASE_RENEWAL && step == freezeAt) {
            freezeAt = null;
            frozen = new CountDownLatch(1);
            reachedFreeze.countDown();
        }
        CountDownLatch latch = frozen;
        if (latch != null) {
            latch.await();
        }
    }

    /** Freezes the attempt when its own thread next reaches {@code step}. */
    void freezeAt(ProtocolHooks.Step step) {
        freezeAt = step;
    }

    /** Freezes the attempt between operations (its lease keeper stops at its next renewal). */
    void freezeNow() {
        if (frozen == null) {
            frozen = new CountDownLatch(1);
        }
    }

    boolean isFrozen() {
        return frozen != null;
    }

    /** Lets the frozen attempt go on, and waits for the operation it was frozen in. */
    Result wake(long timeoutMillis) throws TimeoutException {
        reachedFreeze = new CountDownLatch(1);
        CountDownLatch latch = frozen;
        frozen = null;
        if (latch != null) {
            latch.countDown();
        }
        return running == null ? Result.DONE : await(timeoutMillis);
    }

    /** Hands {@code operation} to the attempt's thread and waits until it ends or freezes. */
    Result run(ThrowingRunnable operation, long timeoutMillis) throws TimeoutException {
        submit(operation);
        return await(timeoutMillis);
    }

    /** Hands {@code operation} to the attempt's thread; {@link #await} waits for it. */
    void submit(ThrowingRunnable operation) {
        if (running != null && !running.isDone()) {
            throw new IllegalStateException(name + " is still in an operation");
        }
        failure = null;
        reachedFreeze = new CountDownLatch(1);
        running = thread.submit(() -> {
            try {
                operation.run();
            } catch (Throwable e) {
                failure = e;
            }
            return null;
        });
    }

    /** Waits until the operation handed over ends or freezes. */
    Result await(long timeoutMillis) throws TimeoutException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMillis);
        while (System.nanoTime() < deadline) {
            if (running.isDone()) {
                running = null;
                return failure == null ? Result.DONE : Result.FAILED;
            }
            try {
                if (reachedFreeze.await(5, TimeUnit.MILLISECONDS)) {
                    return Result.FROZE;
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException(e);
            }
        }
        throw new TimeoutException(name + " did not end its operation within " + timeoutMillis + " ms");
    }

    /** Stops the thread (an operation frozen in it is let go first). */
    void stop() {
        CountDownLatch latch = frozen;
        frozen = null;
        if (latch != null) {
            latch.countDown();
        }
        thread.shutdownNow();
    }

    @FunctionalInterface
    interface ThrowingRunnable {
        void run() throws Exception;
    }

    @Override
    public String toString() {
        return name;
    }
}
