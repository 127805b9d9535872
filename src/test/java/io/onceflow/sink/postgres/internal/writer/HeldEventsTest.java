package io.onceflow.sink.postgres.internal.writer;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.api.Event;
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

    private Path spillDirectory() {
        return root.resolve(HeldEvents.DIRECTORY).resolve(String.valueOf(ProcessHandle.current().pid()));
    }

    private long spillFiles() throws Exception {
        if (!Files.isDirectory(spillDirectory())) {
            return 0;
        }
        try (var files = Files.list(spillDirectory())) {
            return files.count();
        }
    }

    @Test
    void beyondTheMemoryLimitEventsGoToAFileAndComeBackInTheOrderTheyCame() throws Exception {
        long limit = 10 * HeldEvents.bytesOf(event(0));
        List<Event> input = events(5_000);
        List<Event> handedOut = new ArrayList<>();
        try (HeldEvents held = new HeldEvents(root, "job-s0-e7", limit)) {
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
        try (HeldEvents held = new HeldEvents(root, "job-s0-e7", Long.MAX_VALUE)) {
            for (Event event : events(100)) {
                held.add(event);
            }
            assertThat(held.spilled()).isZero();
            assertThat(spillFiles()).isZero();
        }
        List<Event> handedOut = new ArrayList<>();
        try (HeldEvents held = new HeldEvents(root, "job-s0-e8", 0)) {
            for (Event event : events(3)) {
                held.add(event);
            }
            assertThat(held.memoryBytes()).isZero();
            held.forEach(handedOut::add);
        }
        assertThat(handedOut).isEqualTo(events(3));
    }

    @Test
    void aClosedAttemptLeavesNoFileAndAStartDeletesTheFilesOfDeadProcessesOnly() throws Exception {
        HeldEvents held = new HeldEvents(root, "job-s0-e7", 0);
        held.add(event(1));
        assertThat(spillFiles()).isEqualTo(1);
        held.close();
        assertThat(spillFiles()).isZero();

        Process finished = new ProcessBuilder("true").start();
        finished.waitFor();
        Path dead = root.resolve(HeldEvents.DIRECTORY).resolve(String.valueOf(finished.pid()));
        Files.createDirectories(dead);
        Files.writeString(dead.resolve("job-s1-e5-1.spill"), "left by kill -9");
        Path notOurs = Files.createDirectories(root.resolve(HeldEvents.DIRECTORY).resolve("not-a-pid"));
        HeldEvents live = new HeldEvents(root, "job-s0-e9", 0);
        live.add(event(2));

        HeldEvents.deleteSpillsOfDeadProcesses(root);

        assertThat(dead).doesNotExist();
        assertThat(notOurs).exists();
        assertThat(spillFiles()).as("a live process's spill stays").isEqualTo(1);
        List<Event> handedOut = new ArrayList<>();
        live.forEach(handedOut::add);
        assertThat(handedOut).containsExactly(event(2));
        live.close();
    }
}
