package io.onceflow.sink.postgres.internal;

import java.io.IOException;
import java.util.function.Consumer;
import org.apache.flink.annotation.Internal;
import org.apache.flink.annotation.VisibleForTesting;

/**
 * Internal, for the tests of this package: lets them act at each step of the two-phase protocol
 * (fail there, or misbehave on purpose to show that the tests notice). Does nothing unless a test
 * installs a hook, or starts a JVM with the system property {@value #PROCESS_HOOK_PROPERTY}. Static
 * because Flink re-creates writers and committers from serialized sinks after every restart, inside
 * the same JVM in MiniCluster tests.
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

    /**
     * For multi-process tests, which cannot install a hook in a TaskManager's JVM: the name of a class
     * with a public no-argument constructor implementing {@code Consumer<String>}, loaded by the
     * system class loader (so that test code stays out of the job jar) and given the name of every
     * step this JVM's writers and committers reach.
     */
    public static final String PROCESS_HOOK_PROPERTY = "onceflow.test.process-hook";

    private static final Hook NONE = (step, transaction) -> {};
    private static final Consumer<String> PROCESS_HOOK = processHook();
    private static volatile Hook installed = NONE;

    private ProtocolHooks() {}

    public static void install(Hook hook) {
        installed = hook;
    }

    public static void reset() {
        installed = NONE;
    }

    @SuppressWarnings("unchecked")
    private static Consumer<String> processHook() {
        String name = System.getProperty(PROCESS_HOOK_PROPERTY);
        if (name == null || name.isBlank()) {
            return null;
        }
        try {
            return (Consumer<String>) Class.forName(name, true, ClassLoader.getSystemClassLoader())
                    .getDeclaredConstructor().newInstance();
        } catch (ReflectiveOperationException | ClassCastException e) {
            throw new IllegalStateException(PROCESS_HOOK_PROPERTY + "=" + name + " is not a Consumer<String> with a"
                    + " public no-argument constructor on the system class path", e);
        }
    }

    public static void reached(Step step, TransactionId transaction) throws IOException {
        if (PROCESS_HOOK != null) {
            PROCESS_HOOK.accept(step.name());
        }
        try {
            installed.reached(step, transaction);
        } catch (IOException | RuntimeException e) {
            throw e;
        } catch (Exception e) {
            throw new IOException("protocol hook failed at " + step + " of " + transaction, e);
        }
    }
}
