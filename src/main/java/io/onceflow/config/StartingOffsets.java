package io.onceflow.config;

/**
 * Where the Kafka source starts reading when the job has no checkpoint or savepoint to restore;
 * after a restore, the offsets in the checkpoint always win.
 */
public enum StartingOffsets {
    /** The group's committed offsets; the earliest offset for partitions without one. */
    COMMITTED_OR_EARLIEST("committed-or-earliest"),
    /** The group's committed offsets; the latest offset for partitions without one. */
    COMMITTED_OR_LATEST("committed-or-latest"),
    /** The earliest offset of every partition, ignoring committed offsets. */
    EARLIEST("earliest"),
    /** The latest offset of every partition, ignoring committed offsets. */
    LATEST("latest");

    private final String configValue;

    StartingOffsets(String configValue) {
        this.configValue = configValue;
    }

    /**
     * Returns the value that selects this constant in {@code input.starting.offsets}.
     *
     * @return e.g. {@code committed-or-earliest}
     */
    public String configValue() {
        return configValue;
    }
}
