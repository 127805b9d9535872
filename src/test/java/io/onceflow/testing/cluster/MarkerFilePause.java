package io.onceflow.testing.cluster;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.function.Consumer;

/**
 * The process hook of a {@link FlinkStandaloneCluster}'s JVMs ({@code ProtocolHooks}'s
 * {@code onceflow.test.process-hook}), for multi-process tests, which cannot install a hook in a
 * TaskManager's JVM: stops one thread at a protocol step on a test's request, so that the test can
 * freeze the process (SIGSTOP) exactly there. Loaded by the system class loader from a directory that
 * holds this class alone (see {@link #copyTo}), so it names no other class of onceflow: steps are
 * their names.
 *
 * <p>A test arms a step by creating {@code <STEP>.armed} in the directory of the system property
 * {@value #DIRECTORY_PROPERTY}. The first thread to reach the step takes the file (deletes it: one
 * thread per arming), writes its JVM's pid to {@code <STEP>.reached} and waits, deaf to interrupts
 * (a cancelled task must still reach the database after its wake-up, as a real frozen one would),
 * until {@code <STEP>.release} exists, or for {@link #LONGEST_WAIT} at most.
 */
public final class MarkerFilePause implements Consumer<String> {
    public static final String DIRECTORY_PROPERTY = "onceflow.test.pause-points";
    private static final Duration LONGEST_WAIT = Duration.ofMinutes(10);
    private final Path directory;

    public MarkerFilePause() {
        String configured = System.getProperty(DIRECTORY_PROPERTY);
        this.directory = configured == null || configured.isBlank() ? null : Path.of(configured);
    }

    /** Pauses here if a test armed {@code step}; returns at once otherwise. */
    @Override
    public void accept(String step) {
        if (directory == null) {
            return;
        }
        try {
            Files.delete(armed(directory, step));
        } catch (NoSuchFileException notArmed) {
            return; // not armed, or another thread took it
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        try {
            Files.writeString(directory.resolve(step + ".reached"), String.valueOf(ProcessHandle.current().pid()));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        awaitRelease(directory.resolve(step + ".release"));
    }

    /** The file that arms {@code step} in {@code directory}. */
    public static Path armed(Path directory, String step) {
        return directory.resolve(step + ".armed");
    }

    /**
     * Copies this class alone into {@code classes}, a class-path directory for a cluster's JVMs.
     *
     * @return {@code classes}
     */
    static Path copyTo(Path classes) throws IOException {
        String file = MarkerFilePause.class.getName().replace('.', '/') + ".class";
        Path target = classes.resolve(file);
        Files.createDirectories(target.getParent());
        try (InputStream bytes = MarkerFilePause.class.getClassLoader().getResourceAsStream(file)) {
            if (bytes == null) {
                throw new IOException("cannot read " + file + " from the test class path");
            }
            Files.write(target, bytes.readAllBytes());
        }
        return classes;
    }

    private static void awaitRelease(Path release) {
        boolean interrupted = false;
        long deadline = System.nanoTime() + LONGEST_WAIT.toNanos();
        while (!Files.exists(release) && System.nanoTime() < deadline) {
            try {
                Thread.sleep(50);
            } catch (InterruptedException e) {
                interrupted = true;
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }
}
