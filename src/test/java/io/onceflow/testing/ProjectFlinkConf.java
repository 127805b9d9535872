package io.onceflow.testing;

import java.util.HashMap;
import java.util.Map;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.GlobalConfiguration;

/** The project's cluster configuration, {@code flink-conf/config.yaml}, for tests that run Flink in process. */
public final class ProjectFlinkConf {
    /** Relative to the project directory (the working directory of surefire, failsafe and the benchmark). */
    private static final String DIRECTORY = "flink-conf";
    private static final String ROCKSDB_PREFIX = "state.backend.rocksdb.";

    private ProjectFlinkConf() {
    }

    /** The {@code state.backend.rocksdb.*} settings users run with (bloom filters, compaction style...). */
    public static Configuration rocksDbSettings() {
        Map<String, String> rocksDb = new HashMap<>(GlobalConfiguration.loadConfiguration(DIRECTORY).toMap());
        rocksDb.keySet().removeIf(key -> !key.startsWith(ROCKSDB_PREFIX));
        return Configuration.fromMap(rocksDb);
    }
}
