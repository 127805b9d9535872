package io.onceflow.sink.postgres.internal;

import io.onceflow.api.Event;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.file.FileSystems;
import java.nio.file.Files;
import java.nio.file.OpenOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import org.apache.flink.core.memory.DataInputViewStreamWrapper;
import org.apache.flink.core.memory.DataOutputViewStreamWrapper;
import org.apache.flink.metrics.Counter;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The events a writer attempt receives before its first checkpoint barrier, where it claims its
 * subtask and may write (see {@code WriterClaim}): in memory up to a number of bytes, the rest in a
 * local spill file, so that a long first interval (a backlog after a restart, checkpoints that keep
 * failing before their barrier) cannot exhaust the heap. {@link #forEach} hands them out in the order
 * they came.
 *
 * <p>Why a local file and not a table: held events are needed only until the barrier's
 * {@code PREPARE}, in the same session. If the attempt dies first, its input is replayed from the
 * restored checkpoint (or the fresh start's offsets), and a fresh start sees the barrier's prepared
 * transaction; nothing held needs to outlive the process. A table would cost the database the
 * events twice more and another table in every schema.
 *
 * <p>The spill file has no name: it is opened with {@code DELETE_ON_CLOSE}, which on POSIX systems
 * unlinks it as it opens (readable by its owner only, for that moment), and is written and read back
 * through its one channel. Its disk space goes with the channel, when the attempt closes it or when
 * the process dies, {@code kill -9} included: nothing is left for anyone to sweep. It shows in
 * {@code df}, not in {@code ls} ({@code lsof +L1} lists it). (On Windows it keeps its name until
 * its handle closes, which the system does for a killed process too.)
 */
final class HeldEvents implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(HeldEvents.class);
    /** What an event costs on the heap beyond its bytes: the object, its strings, the list slot. */
    private static final int OVERHEAD_BYTES = 160;
    private static final int BUFFER_BYTES = 1 << 16;
    /** Held events are the job's input: no other user of the machine may read them. */
    private static final Set<PosixFilePermission> OWNER_ONLY = PosixFilePermissions.fromString("rw-------");

    private final Path directory;
    private final String writerName;
    private final long memoryLimit;
    private final Counter spilledEvents;
    private final List<Event> inMemory = new ArrayList<>();
    private long memoryBytes;
    /** The unnamed spill file, null until the first event beyond the limit. */
    private FileChannel spillFile;
    private DataOutputViewStreamWrapper spill;
    private int spilled;

    /**
     * @param directory where the spill file goes ({@code java.io.tmpdir} in a job)
     * @param writerName for the log line of the first spill
     * @param memoryLimit bytes held in memory before spilling; 0 spills every event
     * @param spilledEvents counts the events that go to the file
     */
    HeldEvents(Path directory, String writerName, long memoryLimit, Counter spilledEvents) {
        this.directory = directory;
        this.writerName = writerName;
        this.memoryLimit = memoryLimit;
        this.spilledEvents = spilledEvents;
    }

    /** Holds {@code event}: in memory while within the limit and nothing was spilled yet, else in the file. */
    void add(Event event) throws IOException {
        long bytes = bytesOf(event);
        if (spill == null && memoryBytes + bytes <= memoryLimit) {
            inMemory.add(event);
            memoryBytes += bytes;
            return;
        }
        if (spill == null) {
            spillFile = openUnnamed(directory);
            spill = new DataOutputViewStreamWrapper(new BufferedOutputStream(Channels.newOutputStream(spillFile),
                    BUFFER_BYTES));
            LOG.info("{}: more than {} bytes of events held before the first checkpoint barrier; spilling the rest to"
                    + " an unnamed file in {}", writerName, memoryLimit, directory);
        }
        EventFormat.write(event, spill);
        spilled++;
        spilledEvents.inc();
    }

    /**
     * A new file in {@code directory} (created if missing), readable by this process's user only
     * (on POSIX; else the directory's default) and unlinked as it opens.
     */
    private static FileChannel openUnnamed(Path directory) throws IOException {
        Files.createDirectories(directory);
        Path file = directory.resolve("onceflow-held-events-" + UUID.randomUUID() + ".spill");
        Set<OpenOption> options = Set.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.READ,
                StandardOpenOption.WRITE, StandardOpenOption.DELETE_ON_CLOSE);
        if (FileSystems.getDefault().supportedFileAttributeViews().contains("posix")) {
            return FileChannel.open(file, options, PosixFilePermissions.asFileAttribute(OWNER_ONLY));
        }
        return FileChannel.open(file, options);
    }

    int size() {
        return inMemory.size() + spilled;
    }

    boolean isEmpty() {
        return size() == 0;
    }

    /** Bytes held on the heap, as estimated for the limit. */
    long memoryBytes() {
        return memoryBytes;
    }

    int spilled() {
        return spilled;
    }

    /** Something that takes the held events one by one. */
    @FunctionalInterface
    interface EventConsumer {
        void accept(Event event) throws IOException;
    }

    /** Hands every held event to {@code consumer}, in the order they came, then holds none. */
    void forEach(EventConsumer consumer) throws IOException {
        for (Event event : inMemory) {
            consumer.accept(event);
        }
        inMemory.clear();
        memoryBytes = 0;
        if (spill != null) {
            spill.flush();
            spillFile.position(0);
            DataInputViewStreamWrapper in = new DataInputViewStreamWrapper(new DataInputStream(
                    new BufferedInputStream(Channels.newInputStream(spillFile), BUFFER_BYTES)));
            for (int i = 0; i < spilled; i++) {
                consumer.accept(EventFormat.read(in));
            }
        }
        close();
    }

    /**
     * Drops what is held (the input is replayed from the restored checkpoint) and frees the spill
     * file's disk space by closing its channel, also when the buffer's last flush would fail on a full
     * disk (the output stream is not closed: it would flush first).
     */
    @Override
    public void close() {
        inMemory.clear();
        memoryBytes = 0;
        spilled = 0;
        spill = null;
        if (spillFile != null) {
            try {
                spillFile.close();
            } catch (IOException e) {
                LOG.warn("{}: could not close its spill file: {}", writerName, e.toString());
            }
            spillFile = null;
        }
    }

    static long bytesOf(Event event) {
        long bytes = OVERHEAD_BYTES + length(event.payload) + length(event.sourceKey)
                + 2L * (chars(event.messageId) + chars(event.sourceTopic));
        if (event.headers != null) {
            for (Map.Entry<String, byte[]> header : event.headers.entrySet()) {
                bytes += 64 + 2L * chars(header.getKey()) + length(header.getValue());
            }
        }
        return bytes;
    }

    private static int length(byte[] bytes) {
        return bytes == null ? 0 : bytes.length;
    }

    private static int chars(String text) {
        return text == null ? 0 : text.length();
    }
}
