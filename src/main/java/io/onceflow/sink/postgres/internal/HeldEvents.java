package io.onceflow.sink.postgres.internal;

import io.onceflow.api.Event;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Stream;
import org.apache.flink.core.memory.DataInputViewStreamWrapper;
import org.apache.flink.core.memory.DataOutputViewStreamWrapper;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The events a writer attempt receives before its first checkpoint barrier, where it claims its
 * subtask and may write (see {@code WriterFence}): in memory up to a number of bytes, the rest in a
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
 * <p>Spill files live in {@code <java.io.tmpdir>/onceflow-held-events/<id>/}, one directory per
 * process, next to {@code <id>.lock}, which the process locks for its life. A writer's start deletes
 * the directories whose lock it can take: their process is gone (killed with {@code kill -9}). A
 * lock, not a pid, because TaskManagers in containers may share a temporary directory but not a
 * process namespace.
 */
final class HeldEvents implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(HeldEvents.class);
    static final String DIRECTORY = "onceflow-held-events";
    /** What an event costs on the heap beyond its bytes: the object, its strings, the list slot. */
    private static final int OVERHEAD_BYTES = 160;

    private static final String LOCK_SUFFIX = ".lock";
    /** This process's spill directory under each root; the channels keep their locks for the process's life. */
    private static final Map<Path, Path> PROCESS_DIRECTORIES = new ConcurrentHashMap<>();
    private static final List<FileChannel> PROCESS_LOCKS = new CopyOnWriteArrayList<>();

    private final Path root;
    private final String fileName;
    private final long memoryLimit;
    private final List<Event> inMemory = new ArrayList<>();
    private long memoryBytes;
    private Path spillFile;
    private DataOutputViewStreamWrapper spill;
    private int spilled;

    /**
     * @param root where spill directories go ({@code java.io.tmpdir} in a job)
     * @param fileName names the writer (prefix, subtask), for whoever looks at the disk
     * @param memoryLimit bytes held in memory before spilling; 0 spills every event
     */
    HeldEvents(Path root, String fileName, long memoryLimit) {
        this.root = root;
        this.fileName = fileName;
        this.memoryLimit = memoryLimit;
    }

    /**
     * Holds {@code event}: in memory while within the limit and nothing was spilled yet, else in the file.
     *
     * @return whether it went to the file
     */
    boolean add(Event event) throws IOException {
        long bytes = bytesOf(event);
        if (spill == null && memoryBytes + bytes <= memoryLimit) {
            inMemory.add(event);
            memoryBytes += bytes;
            return false;
        }
        if (spill == null) {
            spillFile = Files.createTempFile(processDirectory(root), fileName + "-", ".spill");
            spill = new DataOutputViewStreamWrapper(new BufferedOutputStream(Files.newOutputStream(spillFile), 1 << 16));
            LOG.info("{}: more than {} bytes of events held before the first checkpoint barrier; spilling the rest to {}",
                    fileName, memoryLimit, spillFile);
        }
        EventFormat.write(event, spill);
        spilled++;
        return true;
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
            spill.close();
            spill = null;
            try (InputStream file = new BufferedInputStream(Files.newInputStream(spillFile), 1 << 16)) {
                DataInputViewStreamWrapper in = new DataInputViewStreamWrapper(new DataInputStream(file));
                for (int i = 0; i < spilled; i++) {
                    consumer.accept(EventFormat.read(in));
                }
            }
            deleteSpillFile();
        }
        spilled = 0;
    }

    /**
     * Drops what is held (the input is replayed from the restored checkpoint) and deletes the spill
     * file, also when closing it fails (a full disk fails the flush again); a file that cannot be
     * deleted is logged, and deleted by a later start once this process is gone.
     */
    @Override
    public void close() {
        inMemory.clear();
        memoryBytes = 0;
        spilled = 0;
        try {
            if (spill != null) {
                spill.close();
            }
        } catch (IOException e) {
            LOG.debug("{}: closing its spill file failed: {}", fileName, e.toString());
        } finally {
            spill = null;
            try {
                deleteSpillFile();
            } catch (IOException e) {
                LOG.warn("{}: could not delete its spill file {}: {}", fileName, spillFile, e.toString());
            }
        }
    }

    private void deleteSpillFile() throws IOException {
        if (spillFile != null) {
            Files.deleteIfExists(spillFile);
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

    /** This process's spill directory under {@code root}: created, with its lock taken, on first use. */
    private static Path processDirectory(Path root) throws IOException {
        try {
            return PROCESS_DIRECTORIES.computeIfAbsent(root, HeldEvents::createLockedDirectory);
        } catch (UncheckedIOException e) {
            throw e.getCause();
        }
    }

    /** The lock first, then the directory: a sweep never finds this directory without its lock taken. */
    private static Path createLockedDirectory(Path root) {
        try {
            Path spills = Files.createDirectories(root.resolve(DIRECTORY));
            String id = UUID.randomUUID().toString();
            FileChannel lock = FileChannel.open(spills.resolve(id + LOCK_SUFFIX), StandardOpenOption.CREATE_NEW,
                    StandardOpenOption.WRITE);
            PROCESS_LOCKS.add(lock);
            lock.lock();
            return Files.createDirectories(spills.resolve(id));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * Deletes the spill directories under {@code root} whose process is gone (its lock can be
     * taken): a writer killed with {@code kill -9} cannot delete its file. Best effort: a failure is
     * logged, never thrown.
     */
    static void deleteSpillsOfDeadProcesses(Path root) {
        Path spills = root.resolve(DIRECTORY);
        if (!Files.isDirectory(spills)) {
            return;
        }
        try (Stream<Path> entries = Files.list(spills)) {
            for (Path lockFile : entries.filter(p -> p.getFileName().toString().endsWith(LOCK_SUFFIX)).toList()) {
                String id = lockFile.getFileName().toString();
                deleteIfUnlocked(lockFile, spills.resolve(id.substring(0, id.length() - LOCK_SUFFIX.length())));
            }
        } catch (IOException | RuntimeException e) {
            LOG.warn("Could not delete the spill files of held events that dead processes left in {}: {}", spills,
                    e.toString());
        }
    }

    private static void deleteIfUnlocked(Path lockFile, Path directory) throws IOException {
        if (PROCESS_DIRECTORIES.containsValue(directory)) {
            return; // this process's own
        }
        try (FileChannel channel = FileChannel.open(lockFile, StandardOpenOption.WRITE);
                FileLock lock = channel.tryLock()) {
            if (lock == null) {
                return; // a live process holds it
            }
            if (Files.isDirectory(directory)) {
                deleteRecursively(directory);
            }
            Files.deleteIfExists(lockFile);
        } catch (NoSuchFileException | OverlappingFileLockException e) {
            // another sweep took it first, or this process holds it
        }
    }

    private static void deleteRecursively(Path directory) throws IOException {
        try (Stream<Path> files = Files.list(directory)) {
            for (Path file : files.toList()) {
                Files.deleteIfExists(file);
            }
        }
        Files.deleteIfExists(directory);
    }
}
