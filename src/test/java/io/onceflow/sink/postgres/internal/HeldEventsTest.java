package io.onceflow.sink.postgres.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.onceflow.api.Event;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileStore;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.IntStream;
import java.util.stream.Stream;
import org.apache.flink.metrics.SimpleCounter;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The events a writer holds before its first barrier: bounded on the heap, spilled beyond, handed out in order. */
class HeldEventsTest {
    @TempDir
    Path root;

    private static Event event(int i) {
        Event event = new Event();
        event.messageId = "e" + i;
        event.payload = ("{\"n\": " + i + "}").getBytes(StandardCharsets.UTF_8);
        event.sourceTopic = "orders";
        event.sourcePartition = i % 3;
        event.sourceOffset = i;
        event.sourceTimestamp = 1_700_000_000_000L + i;
        event.headers = i % 2 == 0 ? Map.of("id", event.messageId.getBytes(StandardCharsets.UTF_8)) : Map.of();
        event.sourceKey = i % 5 == 0 ? null : new byte[] {(byte) i};
        return event;
    }

    private static List<Event> events(int count) {
        return IntStream.range(0, count).mapToObj(HeldEventsTest::event).toList();
    }

    /**
     * The spill files under {@code directory} that {@code pid} has open: their names are gone, so
     * only the process's open files show them (Linux's /proc/<pid>/fd, "... (deleted)").
     */
    private static long openSpills(long pid, Path directory) throws Exception {
        try (Stream<Path> fds = Files.list(Path.of("/proc", String.valueOf(pid), "fd"))) {
            return fds.map(HeldEventsTest::target)
                    .filter(target -> target.startsWith(directory.toString()) && target.endsWith(".spill (deleted)"))
                    .count();
        }
    }

    private long openSpills() throws Exception {
        return openSpills(ProcessHandle.current().pid(), root);
    }

    private static String target(Path fd) {
        try {
            return Files.readSymbolicLink(fd).toString();
        } catch (IOException gone) { // the listing's own descriptor, closed by now
            return "";
        }
    }

    /** What anyone listing the directory sees. */
    private static List<Path> names(Path directory) throws IOException {
        try (Stream<Path> files = Files.list(directory)) {
            return files.toList();
        }
    }

    private static Event event(int i, int payloadBytes) {
        Event event = event(i);
        event.payload = "x".repeat(payloadBytes).getBytes(StandardCharsets.UTF_8);
        return event;
    }

    private static ProcessBuilder java(Class<?> main, Path root) {
        return new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-cp",
                System.getProperty("java.class.path"), main.getName(), root.toString());
    }

    @Test
    void beyondTheMemoryLimitEventsGoToAFileAndComeBackInTheOrderTheyCame() throws Exception {
        long limit = 10 * HeldEvents.bytesOf(event(0));
        List<Event> input = events(5_000);
        List<Event> handedOut = new ArrayList<>();
        SimpleCounter spilledEvents = new SimpleCounter();
        try (HeldEvents held = new HeldEvents(root, "job-s0", limit, spilledEvents)) {
            for (Event event : input) {
                held.add(event);
                assertThat(held.memoryBytes()).isLessThanOrEqualTo(limit);
            }
            assertThat(held.size()).isEqualTo(5_000);
            assertThat(held.spilled()).isGreaterThan(4_980);
            assertThat(spilledEvents.getCount()).isEqualTo(held.spilled());
            assertThat(openSpills()).as("one spill file, open").isEqualTo(1);
            assertThat(names(root)).as("it has no name: nothing to sweep after a kill -9").isEmpty();

            held.forEach(handedOut::add);
            assertThat(held.isEmpty()).isTrue();
            assertThat(openSpills()).as("closed once handed out").isZero();
        }
        assertThat(handedOut).isEqualTo(input);
    }

    @Test
    void withinTheLimitNothingIsSpilledAndALimitOfZeroSpillsEveryEvent() throws Exception {
        try (HeldEvents held = new HeldEvents(root, "job-s0", Long.MAX_VALUE, new SimpleCounter())) {
            for (Event event : events(100)) {
                held.add(event);
            }
            assertThat(held.spilled()).isZero();
            assertThat(openSpills()).isZero();
        }
        List<Event> handedOut = new ArrayList<>();
        try (HeldEvents held = new HeldEvents(root, "job-s1", 0, new SimpleCounter())) {
            for (Event event : events(3)) {
                held.add(event);
            }
            assertThat(held.memoryBytes()).isZero();
            held.forEach(handedOut::add);
        }
        assertThat(handedOut).isEqualTo(events(3));
    }

    @Test
    void aClosedAttemptAndAKilledProcessLeaveNothingOnDisk() throws Exception {
        HeldEvents held = new HeldEvents(root, "job-s0", 0, new SimpleCounter());
        held.add(event(1));
        assertThat(openSpills()).isEqualTo(1);
        held.close();
        assertThat(openSpills()).isZero();

        Process other = java(SpillHolder.class, root).start();
        try (BufferedReader out = new BufferedReader(new InputStreamReader(other.getInputStream(),
                StandardCharsets.UTF_8))) {
            String line;
            do { // past its log lines
                line = out.readLine();
            } while (line != null && !line.equals("holding"));
            assertThat(line).as("the other process spilled").isEqualTo("holding");
            assertThat(openSpills(other.pid(), root)).as("its spill file, open").isEqualTo(1);
            assertThat(names(root)).as("and nameless").isEmpty();
            other.destroyForcibly().waitFor(); // kill -9: it deletes nothing, and there is nothing to delete
            assertThat(names(root)).isEmpty();
        } finally {
            other.destroyForcibly();
        }
    }

    /**
     * A spill file in a temporary directory that does not exist yet (a TaskManager's fresh io
     * directory) is created there, and no other user may read it in the moment before it is unlinked
     * (held events are the job's input). Its permissions are those of the open file, through
     * /proc/self/fd.
     */
    @Test
    void aSpillFileIsReadableByItsOwnerOnlyAndItsDirectoryIsCreatedIfMissing() throws Exception {
        Path missing = root.resolve("tm-1").resolve("tmp");
        try (HeldEvents held = new HeldEvents(missing, "job-s0", 0, new SimpleCounter())) {
            held.add(event(1));
            Path open;
            try (Stream<Path> fds = Files.list(Path.of("/proc/self/fd"))) {
                open = fds.filter(fd -> target(fd).startsWith(missing.toString())).findFirst().orElseThrow();
            }
            assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(open))).isEqualTo("rw-------");
            List<Event> handedOut = new ArrayList<>();
            held.forEach(handedOut::add);
            assertThat(handedOut).containsExactly(event(1));
        }
    }

    /**
     * The disk fills mid-spill: the attempt fails, and its close frees the space of the file that
     * filled it (a last flush would fail again on the full disk). Needs root, to mount a small tmpfs.
     */
    @Test
    void aSpillThatRanOutOfDiskIsDeletedWhenTheAttemptCloses() throws Exception {
        Path mount = Files.createDirectories(root.resolve("small"));
        Process mounting = new ProcessBuilder("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", mount.toString())
                .redirectErrorStream(true).start();
        assumeTrue(mounting.waitFor() == 0, "needs root to mount a small tmpfs");
        try {
            HeldEvents held = new HeldEvents(mount, "job-s0", 0, new SimpleCounter());
            Throwable full = null;
            for (int i = 0; i < 10_000 && full == null; i++) {
                full = catchThrowable(() -> held.add(event(0, 1_000)));
            }
            assertThat(full).as("the tmpfs filled up").isInstanceOf(IOException.class)
                    .hasMessageContaining("No space left");
            FileStore disk = Files.getFileStore(mount);
            assertThat(disk.getTotalSpace() - disk.getUnallocatedSpace()).as("the full disk").isGreaterThan(200_000);
            held.close();
            assertThat(openSpills(ProcessHandle.current().pid(), mount)).isZero();
            assertThat(disk.getTotalSpace() - disk.getUnallocatedSpace())
                    .as("bytes used on the disk after the failed attempt's close()").isLessThan(16_384);
        } finally {
            new ProcessBuilder("umount", "-l", mount.toString()).start().waitFor();
        }
    }
}
