package io.onceflow.sink.postgres.internal;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Duration;
import org.apache.flink.annotation.Internal;
import org.apache.flink.annotation.VisibleForTesting;

/**
 * Internal, for multi-process tests, which cannot install {@link ProtocolHooks} in a TaskManager's
 * JVM: stops one thread at a {@link ProtocolHooks.Step} on a test's request, so that the test can
 * freeze the process (SIGSTOP) exactly there. Off unless the JVM has the system property
 * {@value #DIRECTORY_PROPERTY} (a directory; the test harness sets it on its TaskManagers).
 *
 * <p>A test arms a step by creating {@code <STEP>.armed} in that directory. The first thread to
 * reach the step takes the file (deletes it: one thread per arming), writes its JVM's pid to {@code
 * <STEP>.reached} and waits, deaf to interrupts (a cancelled task must still reach the database
 * after its wake-up, as a real frozen one would), until {@code <STEP>.release} exists, or for {@link
 * #LONGEST_WAIT} at most.
 */
@Internal
@VisibleForTesting
public final class MarkerFilePause {
    public static final String DIRECTORY_PROPERTY = "onceflow.test.pause-points";
    private static final Duration LONGEST_WAIT = Duration.ofMinutes(10);
    private static final Path DIRECTORY = directory();

    private MarkerFilePause() {}

    private static Path directory() {
        String directory = System.getProperty(DIRECTORY_PROPERTY);
        return directory == null || directory.isBlank() ? null : Path.of(directory);
    }

    /** Pauses here if a test armed {@code step}; returns at once otherwise. */
    static void reached(ProtocolHooks.Step step) {
        if (DIRECTORY == null) {
            return;
        }
        try {
            Files.delete(armed(DIRECTORY, step));
        } catch (NoSuchFileException notArmed) {
            return; // not armed, or another thread took it
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        try {
            Files.writeString(DIRECTORY.resolve(step + ".reached"), String.valueOf(ProcessHandle.current().pid()));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        awaitRelease(DIRECTORY.resolve(step + ".release"));
    }

    /** The file that arms {@code step} in {@code directory}. */
    public static Path armed(Path directory, ProtocolHooks.Step step) {
        return directory.resolve(step + ".armed");
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
