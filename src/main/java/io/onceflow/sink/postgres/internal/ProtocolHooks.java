package io.onceflow.sink.postgres.internal;

import java.io.IOException;
import java.io.Serializable;
import java.util.function.Consumer;
import org.apache.flink.annotation.Internal;
import org.apache.flink.annotation.VisibleForTesting;

/**
 * Internal, for tests: lets them act at each step of the two-phase protocol (fail there, freeze,
 * or misbehave on purpose to show that the tests notice). A sink's hook comes with its settings
 * ({@link PostgresSinkConfig#hooks()}), so each writer and committer reaches the hook of its own
 * sink and nothing is shared between sinks in one JVM; {@link #NONE} in production. A JVM started
 * with the system property {@value #PROCESS_HOOK_PROPERTY} also tells every step to that class.
 */
@Internal
@VisibleForTesting
public final class ProtocolHooks implements Serializable {
    private static final long serialVersionUID = 1L;

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

    /** What a test does at a step. Serializable: Flink ships the sink, its settings included. */
    @FunctionalInterface
    public interface Hook extends Serializable {
        void reached(Step step, TransactionId transaction) throws Exception;
    }

    /** No hook: what every sink built for production has. */
    public static final ProtocolHooks NONE = new ProtocolHooks(null);

    /**
     * For multi-process tests, which cannot ship a hook into a TaskManager's JVM: the name of a class
     * with a public no-argument constructor implementing {@code Consumer<String>}, loaded by the
     * system class loader (so that test code stays out of the job jar) and given the name of every
     * step this JVM's writers and committers reach. Read once: it is the JVM's setting, not state.
     */
    public static final String PROCESS_HOOK_PROPERTY = "onceflow.test.process-hook";

    private static final Consumer<String> PROCESS_HOOK = processHook();

    /** Null for none. */
    private final Hook hook;

    private ProtocolHooks(Hook hook) {
        this.hook = hook;
    }

    public static ProtocolHooks of(Hook hook) {
        return new ProtocolHooks(hook);
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

    public void reached(Step step, TransactionId transaction) throws IOException {
        if (PROCESS_HOOK != null) {
            PROCESS_HOOK.accept(step.name());
        }
        if (hook == null) {
            return;
        }
        try {
            hook.reached(step, transaction);
        } catch (IOException | RuntimeException e) {
            throw e;
        } catch (Exception e) {
            throw new IOException("protocol hook failed at " + step + " of " + transaction, e);
        }
    }
}
