package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.internal.ProtocolHooks;
import io.onceflow.sink.postgres.internal.TransactionId;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A protocol hook for MiniCluster tests: Flink serializes the sink and gives every writer and
 * committer (after each restart, too) a copy of it, but a test's hook keeps its state (a count of
 * failures, the test's database) in this JVM. The sink carries only this key; the hook stays here
 * until {@link #forget}.
 */
record InJvmHook(String key) implements ProtocolHooks.Hook {
    private static final Map<String, ProtocolHooks.Hook> HOOKS = new ConcurrentHashMap<>();

    static InJvmHook of(ProtocolHooks.Hook hook) {
        InJvmHook key = new InJvmHook(UUID.randomUUID().toString());
        HOOKS.put(key.key(), hook);
        return key;
    }

    @Override
    public void reached(ProtocolHooks.Step step, TransactionId transaction) throws Exception {
        ProtocolHooks.Hook hook = HOOKS.get(key);
        if (hook != null) {
            hook.reached(step, transaction);
        }
    }

    void forget() {
        HOOKS.remove(key);
    }
}
