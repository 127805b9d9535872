package io.onceflow.config;

/**
 * What a start without a checkpoint or savepoint does when the sinks hold transactions of an earlier
 * run ({@code fresh.start.pending}). Those may belong to checkpoints that completed while the
 * consumer group's offsets moved past their input, so rolling them back loses that output.
 */
public enum PendingWorkOnFreshStart {
    /** Refuse to start, naming the latest retained checkpoint to resume from. */
    REFUSE("refuse"),
    /** Roll the transactions back and start anyway: chosen knowingly. */
    DISCARD("discard");

    private final String configValue;

    PendingWorkOnFreshStart(String configValue) {
        this.configValue = configValue;
    }

    /**
     * Returns the value that selects this constant in {@code fresh.start.pending}.
     *
     * @return {@code refuse} or {@code discard}
     */
    public String configValue() {
        return configValue;
    }
}
