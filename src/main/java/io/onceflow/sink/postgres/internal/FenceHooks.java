package io.onceflow.sink.postgres.internal;

import java.io.IOException;
import java.io.UncheckedIOException;

/**
 * The fence's steps for its sink's {@link ProtocolHooks}, which get the writer's transaction id
 * space (its prefix, epoch and subtask, checkpoint 0): the fence has no transaction of its own.
 */
record FenceHooks(ProtocolHooks hooks, String sinkPrefix, long epoch, int subtaskIndex) {

    void reached(ProtocolHooks.Step step) {
        try {
            hooks.reached(step, new TransactionId(sinkPrefix, epoch, subtaskIndex, 0));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
