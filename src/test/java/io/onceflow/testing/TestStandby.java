package io.onceflow.testing;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.List;

/**
 * A primary with a real streaming replica: a copy of the stopped primary's data directory started
 * as a standby (asynchronous until the primary's synchronous_standby_names names it).
 */
public final class TestStandby {
    private static final Duration REPLICATION = Duration.ofSeconds(30);

    private TestStandby() {}

    /** Starts a server, stops it, copies its data directory to {@code copy}, and starts it again. */
    public static TestPostgres primaryWithCopy(Path data, Path copy) throws Exception {
        TestPostgres.start(data).close();
        TestPostgres.copyDataDirectory(data, copy);
        return TestPostgres.start(data);
    }

    /** Starts the copy as a standby streaming from {@code primary}. */
    public static TestPostgres startStandby(Path copy, TestPostgres primary) throws Exception {
        Files.writeString(copy.resolve("standby.signal"), "");
        String port = primary.jdbcUrl().replaceFirst(".*:(\\d+)/.*", "$1");
        Files.writeString(copy.resolve("postgresql.auto.conf"), "\nprimary_conninfo = 'host=127.0.0.1 port=" + port
                + " user=" + primary.user() + "'\n", StandardOpenOption.APPEND);
        return TestPostgres.start(copy);
    }

    /** Waits until the one replica streams from {@code primary} in {@code state} ({@code async}, {@code sync}). */
    public static void awaitSyncState(TestPostgres primary, String state) throws Exception {
        Eventually.await("the replica streams, " + state, REPLICATION, () -> primary.rows(
                "SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming'").equals(List.of(state)));
    }
}
