package io.onceflow.tools.bench;

import io.onceflow.testing.cluster.JvmProcess;
import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.OptionalInt;
import java.util.stream.Collectors;

/**
 * The JVMs of a scenario that cannot run inside the benchmark's JVM, started together, each with its
 * log file: Kafka's copier ends with {@code System.exit}, and Kafka Streams needs its own RocksDB
 * (see {@link #classpath()}). Keeps what the benchmark measures of them: when each started working
 * (a marker line in its log), its CPU time from then on (its start-up is left out, as the job's JVM
 * is warmed up) and its peak RSS, both sampled from {@code /proc} while it runs (a JVM that has
 * ended misses at most its last {@value #POLL_MILLIS} ms: its shutdown).
 */
final class ChildJvms implements AutoCloseable {
    /** Far more than a copier or the Kafka Streams app needs; RocksDB's memory is off-heap anyway. */
    private static final List<String> JVM_OPTIONS = List.of("-Xmx1g");
    /**
     * Flink's RocksDB fork ships the classes of package {@code org.rocksdb} too, and comes first on
     * the benchmark's classpath; Kafka Streams is built against RocksDB's own release.
     */
    private static final String FLINK_ROCKSDB_JAR = "frocksdbjni";
    private static final int LOG_LINES_ON_FAILURE = 30;
    private static final long POLL_MILLIS = 50;

    private final String name;
    private final List<JvmProcess> processes;
    private final double[] startUpCpuSeconds;
    private final double[] cpuSeconds;
    private final long[] peakRssBytes;

    private ChildJvms(String name, List<JvmProcess> processes) {
        this.name = name;
        this.processes = processes;
        this.startUpCpuSeconds = new double[processes.size()];
        this.cpuSeconds = new double[processes.size()];
        this.peakRssBytes = new long[processes.size()];
    }

    /**
     * Starts one JVM of {@code mainClass} per element of {@code arguments}, logging to
     * {@code <logDirectory>/<name>-<i>.log}.
     */
    static ChildJvms start(String name, String mainClass, List<List<String>> arguments, Path logDirectory) {
        List<JvmProcess> processes = new ArrayList<>();
        for (int i = 0; i < arguments.size(); i++) {
            processes.add(JvmProcess.start(name + "-" + i, JVM_OPTIONS, classpath(), mainClass, arguments.get(i),
                    logDirectory.resolve(name + "-" + i + ".log")));
        }
        return new ChildJvms(name, processes);
    }

    /** This JVM's classpath (the project's test classes and every dependency) without Flink's RocksDB. */
    private static String classpath() {
        return Arrays.stream(System.getProperty("java.class.path").split(File.pathSeparator))
                .filter(entry -> !entry.contains(FLINK_ROCKSDB_JAR))
                .collect(Collectors.joining(File.pathSeparator));
    }

    /**
     * Waits until the log of every JVM has a line containing {@code marker}, noting the CPU each had
     * used when its marker was seen (within {@value #POLL_MILLIS} ms).
     */
    void awaitStarted(String marker, Duration timeout) throws Exception {
        boolean[] started = new boolean[processes.size()];
        JobScenario.await(timeout, () -> {
            for (int i = 0; i < processes.size(); i++) {
                if (!started[i] && Files.readString(processes.get(i).log()).contains(marker)) {
                    startUpCpuSeconds[i] = ResourceMeter.cpuSecondsOf(processes.get(i).pid());
                    started[i] = true;
                }
            }
            for (boolean s : started) {
                if (!s) {
                    return false;
                }
            }
            return true;
        }, "'" + marker + "' in the log of every " + name + " JVM", this::check);
    }

    /**
     * Notes each live JVM's CPU time and peak RSS so far, and throws, with the end of its log, if one
     * has exited with a status other than 0. Call while waiting for their output, and once when it is
     * there.
     */
    void check() throws IOException {
        for (int i = 0; i < processes.size(); i++) {
            JvmProcess process = processes.get(i);
            cpuSeconds[i] = Math.max(cpuSeconds[i], ResourceMeter.cpuSecondsOf(process.pid()));
            peakRssBytes[i] = Math.max(peakRssBytes[i], ResourceMeter.peakRssBytes(process.pid()));
            OptionalInt exit = process.exitValue();
            if (exit.isPresent() && exit.getAsInt() != 0) {
                throw new IllegalStateException(process + " exited with status " + exit.getAsInt() + "; the end of "
                        + process.log() + ":\n" + tail(process.log()));
            }
        }
    }

    private static String tail(Path log) throws IOException {
        List<String> lines = Files.readAllLines(log);
        return String.join("\n", lines.subList(Math.max(0, lines.size() - LOG_LINES_ON_FAILURE), lines.size()));
    }

    /** Waits until every JVM has ended by itself, with status 0. */
    void awaitExit(Duration timeout) throws Exception {
        JobScenario.await(timeout, () -> processes.stream().noneMatch(JvmProcess::isAlive),
                "the end of every " + name + " JVM", this::check);
        check();
    }

    /** Asks every JVM to stop (SIGTERM: shutdown hooks run) and waits until each has ended. */
    void stop(Duration grace) {
        processes.forEach(process -> process.stop(grace));
    }

    /** CPU seconds the JVMs used from their markers to the last {@link #check()}. */
    double cpuSecondsSinceStarted() {
        double seconds = 0;
        for (int i = 0; i < processes.size(); i++) {
            seconds += cpuSeconds[i] - startUpCpuSeconds[i];
        }
        return seconds;
    }

    /** The sum of the JVMs' peak RSS, as last seen while they ran (a ceiling: the peaks need not coincide). */
    long peakRssBytes() {
        return Arrays.stream(peakRssBytes).sum();
    }

    /** Kills whatever still runs, e.g. after a failure. */
    @Override
    public void close() {
        processes.stream().filter(JvmProcess::isAlive).forEach(JvmProcess::kill);
    }
}
