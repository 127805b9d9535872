package io.onceflow.sink.postgres.internal;

import java.nio.file.Path;

/** A writer start's sweep of dead processes' spill directories, run in another process (another PID namespace). */
public final class SpillSweeper {
    public static void main(String[] args) {
        HeldEvents.deleteSpillsOfDeadProcesses(Path.of(args[0]));
    }
}
