package io.onceflow.sink.postgres.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.onceflow.api.Event;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.IntStream;
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

    /** Spill files under the root, of every process. */
    private long spillFiles() throws Exception {
        Path spills = root.resolve(HeldEvents.DIRECTORY);
        if (!Files.isDirectory(spills)) {
            return 0;
        }
        try (var files = Files.walk(spills)) {
            return files.filter(file -> file.toString().endsWith(".spill")).count();
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
        try (HeldEvents held = new HeldEvents(root, "job-s0", limit)) {
            for (Event event : input) {
                held.add(event);
                assertThat(held.memoryBytes()).isLessThanOrEqualTo(limit);
            }
            assertThat(held.size()).isEqualTo(5_000);
            assertThat(held.spilled()).isGreaterThan(4_980);
            assertThat(spillFiles()).isEqualTo(1);

            held.forEach(handedOut::add);
            assertThat(held.isEmpty()).isTrue();
            assertThat(spillFiles()).as("deleted once handed out").isZero();
        }
        assertThat(handedOut).isEqualTo(input);
    }

    @Test
    void withinTheLimitNothingIsSpilledAndALimitOfZeroSpillsEveryEvent() throws Exception {
        try (HeldEvents held = new HeldEvents(root, "job-s0", Long.MAX_VALUE)) {
            for (Event event : events(100)) {
                held.add(event);
            }
            assertThat(held.spilled()).isZero();
            assertThat(spillFiles()).isZero();
        }
        List<Event> handedOut = new ArrayList<>();
        try (HeldEvents held = new HeldEvents(root, "job-s1", 0)) {
            for (Event event : events(3)) {
                held.add(event);
            }
            assertThat(held.memoryBytes()).isZero();
            held.forEach(handedOut::add);
        }
        assertThat(handedOut).isEqualTo(events(3));
    }

    @Test
    void aClosedAttemptLeavesNoFileAndAStartDeletesTheSpillsOfDeadProcessesOnly() throws Exception {
        HeldEvents held = new HeldEvents(root, "job-s0", 0);
        held.add(event(1));
        assertThat(spillFiles()).isEqualTo(1);
        held.close();
        assertThat(spillFiles()).isZero();

        Process other = java(SpillHolder.class, root).start();
        try (BufferedReader out = new BufferedReader(new InputStreamReader(other.getInputStream(),
                StandardCharsets.UTF_8))) {
            String line;
            do { // past its log lines
                line = out.readLine();
            } while (line != null && !line.equals("holding"));
            assertThat(line).as("the other process spilled").isEqualTo("holding");
            HeldEvents live = new HeldEvents(root, "job-s0", 0);
            live.add(event(2));
            assertThat(spillFiles()).isEqualTo(2);

            HeldEvents.deleteSpillsOfDeadProcesses(root);
            assertThat(spillFiles()).as("the other live process's spill and this one's stay").isEqualTo(2);

            other.destroyForcibly().waitFor(); // kill -9: it deletes nothing
            assertThat(spillFiles()).isEqualTo(2);
            HeldEvents.deleteSpillsOfDeadProcesses(root);
            assertThat(spillFiles()).as("the dead process's spill is gone").isEqualTo(1);
            List<Event> handedOut = new ArrayList<>();
            live.forEach(handedOut::add);
            assertThat(handedOut).containsExactly(event(2));
            live.close();
        } finally {
            other.destroyForcibly();
        }
    }

    /**
     * Two TaskManagers in two containers (two PID namespaces) sharing one temporary directory: a
     * writer start in one leaves the other's live spill alone (with directories named by pid, it
     * deleted it: that pid does not exist in its namespace). Needs {@code unshare --pid}.
     */
    @Test
    void aWriterStartInAnotherPidNamespaceLeavesALiveWritersSpillAlone() throws Exception {
        assumeTrue(new ProcessBuilder("unshare", "--pid", "--fork", "--mount-proc", "true").start().waitFor() == 0,
                "needs unshare --pid");
        List<Event> input = events(10);
        List<Event> handedOut = new ArrayList<>();
        try (HeldEvents live = new HeldEvents(root, "job-s0", 0)) {
            for (Event event : input) {
                live.add(event);
            }
            List<String> command = new ArrayList<>(List.of("unshare", "--pid", "--fork", "--mount-proc"));
            command.addAll(java(SpillSweeper.class, root).command());
            assertThat(new ProcessBuilder(command).inheritIO().start().waitFor()).isZero();
            live.forEach(handedOut::add);
        }
        assertThat(handedOut).isEqualTo(input);
    }

    /**
     * The disk fills mid-spill: the attempt fails, and its close deletes the file that filled it
     * (closing fails again on the full disk). Needs root, to mount a small tmpfs.
     */
    @Test
    void aSpillThatRanOutOfDiskIsDeletedWhenTheAttemptCloses() throws Exception {
        Path mount = Files.createDirectories(root.resolve(HeldEvents.DIRECTORY));
        Process mounting = new ProcessBuilder("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", mount.toString())
                .redirectErrorStream(true).start();
        assumeTrue(mounting.waitFor() == 0, "needs root to mount a small tmpfs");
        try {
            HeldEvents held = new HeldEvents(root, "job-s0", 0);
            Throwable full = null;
            for (int i = 0; i < 10_000 && full == null; i++) {
                full = catchThrowable(() -> held.add(event(0, 1_000)));
            }
            assertThat(full).as("the tmpfs filled up").isInstanceOf(IOException.class)
                    .hasMessageContaining("No space left");
            held.close();
            assertThat(spillFiles()).as("the spill file, after the failed attempt's close()").isZero();
        } finally {
            new ProcessBuilder("umount", "-l", mount.toString()).start().waitFor();
        }
    }
}
