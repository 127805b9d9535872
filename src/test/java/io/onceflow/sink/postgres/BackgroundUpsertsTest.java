package io.onceflow.sink.postgres;

import static io.onceflow.sink.postgres.SinkDatabase.event;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.BackgroundUpserts;
import io.onceflow.sink.postgres.internal.EventUpsertBatch;
import io.onceflow.testing.Eventually;
import java.io.IOException;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The mechanism of {@link BackgroundUpserts} with stand-in upserts (no database): order, the bound
 * on upserts in flight, waiting, and failures that surface at the next call instead of being lost.
 */
class BackgroundUpsertsTest {
    private static final long TIMEOUT_SECONDS = 10;

    private final List<String> executed = new CopyOnWriteArrayList<>();
    private final CountDownLatch release = new CountDownLatch(1);
    /** Batches of 2 rows; the connection is never touched by the stand-ins. */
    private final BackgroundUpserts upserts =
            new BackgroundUpserts(new EventUpsertBatch("events", "rejects", null, null, 2, PostgresSinkMetrics.unregistered()), null, "writer 0", 2);

    @AfterEach
    void close() throws SQLException {
        release.countDown();
        upserts.close();
    }

    private EventUpsertBatch.Upsert recording(String name) {
        return connection -> executed.add(name);
    }

    private EventUpsertBatch.Upsert blockedUntilReleased(String name) {
        return connection -> {
            awaitRelease();
            executed.add(name);
        };
    }

    private void awaitRelease() {
        try {
            release.await(TIMEOUT_SECONDS, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private interface Call {
        void run() throws IOException;
    }

    /**
     * Runs {@code call} on a thread of its own and returns once that thread waits (parked: in
     * BackgroundUpserts only its semaphore parks) or the call has returned; the future completes when
     * the call returns. No sleeping: while an upsert is held by {@link #release}, a call that must wait
     * for it is parked for as long as the test looks, and one that wrongly does not wait has returned.
     */
    private static CompletableFuture<Void> callUntilItWaits(Call call) throws Exception {
        CompletableFuture<Void> returned = new CompletableFuture<>();
        Thread caller = new Thread(() -> {
            try {
                call.run();
                returned.complete(null);
            } catch (Throwable t) {
                returned.completeExceptionally(t);
            }
        }, "caller");
        caller.setDaemon(true);
        caller.start();
        Eventually.await("the call waits or returns", Duration.ofSeconds(TIMEOUT_SECONDS), Duration.ofMillis(1),
                () -> caller.getState() == Thread.State.WAITING || returned.isDone());
        return returned;
    }

    private static EventUpsertBatch.Upsert failing(String message) {
        return connection -> {
            throw new SQLException(message);
        };
    }

    /** Fails only once released, so that the test can queue upserts behind it before it fails. */
    private EventUpsertBatch.Upsert failingOnceReleased(String message) {
        return connection -> {
            awaitRelease();
            throw new SQLException(message);
        };
    }

    @Test
    void upsertsRunInSubmissionOrderAndAwaitAllWaitsForTheQueuedOnes() throws Exception {
        upserts.submit(blockedUntilReleased("first"));
        upserts.submit(recording("second"));
        CompletableFuture<Void> awaited = callUntilItWaits(upserts::awaitAll);

        assertThat(awaited).as("awaitAll returns only after the queued upserts ran").isNotDone();
        release.countDown();
        awaited.get(TIMEOUT_SECONDS, TimeUnit.SECONDS);
        assertThat(executed).containsExactly("first", "second");
    }

    @Test
    void submitBlocksWhileTheMaximumIsInFlight() throws Exception {
        upserts.submit(blockedUntilReleased("running"));
        upserts.submit(recording("queued"));
        CompletableFuture<Void> third = callUntilItWaits(() -> upserts.submit(recording("third")));

        assertThat(third).as("back-pressure: two upserts are already in flight").isNotDone();
        release.countDown();
        third.get(TIMEOUT_SECONDS, TimeUnit.SECONDS);
        upserts.awaitAll();
        assertThat(executed).containsExactly("running", "queued", "third");
    }

    @Test
    void aBackgroundFailureFailsTheNextCallAndSkipsTheUpsertsQueuedBehindIt() throws Exception {
        upserts.submit(failingOnceReleased("duplicate key"));
        upserts.submit(recording("after the failure"));
        release.countDown();

        assertThatThrownBy(upserts::awaitAll)
                .isInstanceOf(IOException.class)
                .hasMessage("writer 0 could not write a batch")
                .hasRootCauseMessage("duplicate key");
        assertThat(executed).as("the transaction is aborted: nothing runs after a failure").isEmpty();
        // And it stays failed: every later call reports it, none loses it.
        assertThatThrownBy(upserts::throwIfFailed).hasRootCauseMessage("duplicate key");
        assertThatThrownBy(() -> upserts.submit(recording("later"))).hasRootCauseMessage("duplicate key");
        assertThatThrownBy(() -> upserts.add(event("a"))).hasRootCauseMessage("duplicate key");
        assertThatThrownBy(upserts::flush).hasRootCauseMessage("duplicate key");
    }

    @Test
    void aFailureSurfacesAtTheNextAddWithoutWaiting() throws Exception {
        upserts.submit(failing("lock timeout"));
        // the failure happened (asking for it does not change it); the task thread has not asked yet
        Eventually.await("the background upsert failed", Duration.ofSeconds(TIMEOUT_SECONDS), () -> {
            try {
                upserts.throwIfFailed();
                return false;
            } catch (IOException failed) {
                return true;
            }
        });

        assertThatThrownBy(() -> upserts.add(event("a")))
                .isInstanceOf(IOException.class)
                .hasRootCauseMessage("lock timeout");
    }
}
