package io.onceflow.cli;

import org.apache.flink.annotation.Internal;

/** The exit statuses of every onceflow command, as documented in docs/configuration.md. */
@Internal
public enum ExitCode {
    /** Done: the job was submitted, the help or DDL printed, the check passed, or the audit found nothing wrong. */
    CLEAN(0),
    /** The audit found missing or duplicated ids, or transactions left behind. */
    FINDINGS(1),
    /**
     * Nothing was done: the configuration is invalid, a service it names cannot be used, or the job
     * was not asked to start outside Flink ({@code --run-local}).
     */
    CANNOT_RUN(2);

    private final int status;

    ExitCode(int status) {
        this.status = status;
    }

    /** The process exit status. */
    public int status() {
        return status;
    }
}
