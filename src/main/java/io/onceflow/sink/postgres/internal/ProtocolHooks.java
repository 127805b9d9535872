package io.onceflow.sink.postgres.internal;

import io.onceflow.sink.postgres.internal.commit.TransactionId;
import java.io.IOException;
import org.apache.flink.annotation.Internal;
import org.apache.flink.annotation.VisibleForTesting;

/**
 * Internal, for the tests of this package: lets them act at each step of the two-phase protocol
 * (fail there, or misbehave on purpose to show that the tests notice). Does nothing unless a test
 * installs a hook, or arms a {@link MarkerFilePause} in a JVM started for it. Static because Flink re-creates writers and committers from serialized sinks
 * after every restart, inside the same JVM in MiniCluster tests.
 */
@Internal
@VisibleForTesting
public final class ProtocolHooks {
    /** The steps, in protocol order. */
    public enum Step {
        /**
         * A writer has connected and taken its epoch, and is about to check its run: it has read
         * nothing of the fence yet (the hook gets the writer's subtask and epoch, checkpoint 0).
         */
        FENCE_OPENING,
        /**
         * A writer's lease keeper is about to renew its session's lease (the hook gets the
         * writer's transaction id space: its prefix, epoch and subtask, checkpoint 0).
         */
        LEASE_RENEWAL,
        /**
         * A writer has read and judged an index's claim under the row's lock, and is about to record
         * its own (the hook gets the writer's transaction id space, as for {@link #LEASE_RENEWAL}).
         */
        CLAIM_DECIDED,
        /**
         * A writer has recorded and committed its claim of an index, and is about to take the index's
         * advisory lock (the hook gets the writer's transaction id space, as for {@link #LEASE_RENEWAL}).
         */
        CLAIM_RECORDED,
        /** The writer has written the checkpoint's rows and is about to prepare. */
        BEFORE_PREPARE,
        /** The writer has prepared; the checkpoint has not completed yet. */
        AFTER_PREPARE,
        /** The checkpoint has completed; the committer is about to commit. */
        BEFORE_COMMIT,
        /** The committer has committed; Flink does not know yet. */
        AFTER_COMMIT
    }

    @FunctionalInterface
    public interface Hook {
        void reached(Step step, TransactionId transaction) throws Exception;
    }

    private static final Hook NONE = (step, transaction) -> {};
    private static volatile Hook installed = NONE;

    private ProtocolHooks() {}

    public static void install(Hook hook) {
        installed = hook;
    }

    public static void reset() {
        installed = NONE;
    }

    public static void reached(Step step, TransactionId transaction) throws IOException {
        MarkerFilePause.reached(step); // for tests that run writers in other JVMs
        try {
            installed.reached(step, transaction);
        } catch (IOException | RuntimeException e) {
            throw e;
        } catch (Exception e) {
            throw new IOException("protocol hook failed at " + step + " of " + transaction, e);
        }
    }
}
