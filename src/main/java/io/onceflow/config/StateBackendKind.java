package io.onceflow.config;

/** The Flink state backend that holds the deduplication state. */
public enum StateBackendKind {
    /** RocksDB on local disk with incremental checkpoints: state may exceed memory. */
    ROCKSDB("rocksdb"),
    /** Objects on the JVM heap: faster, but state must fit in memory. */
    HASHMAP("hashmap");

    private final String configValue;

    StateBackendKind(String configValue) {
        this.configValue = configValue;
    }

    /**
     * Returns the value that selects this constant in {@code state.backend}.
     *
     * @return e.g. {@code rocksdb}
     */
    public String configValue() {
        return configValue;
    }
}
