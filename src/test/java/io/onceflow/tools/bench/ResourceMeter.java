package io.onceflow.tools.bench;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.OptionalLong;
import java.util.stream.Stream;

/**
 * CPU time and peak memory of the benchmark: this JVM (which also runs the embedded Kafka broker,
 * the Flink MiniCluster and the benchmark's own clients) plus the embedded PostgreSQL server, a
 * separate process tree, and the child JVMs of {@link ChildJvms}, whose CPU is read from
 * {@code /proc/<pid>/stat} (Linux only; elsewhere it counts as zero and the report says so).
 */
final class ResourceMeter {
    /** USER_HZ: the unit of /proc/<pid>/stat times. 100 on every mainstream Linux. */
    private static final long CLOCK_TICKS_PER_SECOND = 100;

    private final OptionalLong postgresPid;

    /** @param postgresPid the PostgreSQL postmaster, if it runs on this machine */
    ResourceMeter(OptionalLong postgresPid) {
        this.postgresPid = postgresPid;
    }

    boolean measuresPostgres() {
        return postgresPid.isPresent();
    }

    /** CPU seconds used so far by this JVM and by PostgreSQL (child JVMs: {@link CpuTime#plusChildren}). */
    CpuTime cpuTime() {
        com.sun.management.OperatingSystemMXBean os =
                (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        double jvm = os.getProcessCpuTime() / 1e9;
        double postgres = postgresPid.isPresent() ? postgresTreeTicks(postgresPid.getAsLong()) / (double) CLOCK_TICKS_PER_SECOND : 0;
        return new CpuTime(jvm, 0, postgres);
    }

    /**
     * The postmaster's own time, its reaped children's (backends that exited: cutime, cstime) and its
     * live children's (backends, background workers).
     */
    private static long postgresTreeTicks(long postmaster) {
        long ticks = statTicks(postmaster);
        try (Stream<Path> processes = Files.list(Path.of("/proc"))) {
            ticks += processes
                    .filter(p -> p.getFileName().toString().chars().allMatch(Character::isDigit))
                    .mapToLong(p -> {
                        long pid = Long.parseLong(p.getFileName().toString());
                        return parentOf(pid) == postmaster ? statTicks(pid) : 0;
                    })
                    .sum();
        } catch (IOException e) {
            return ticks;
        }
        return ticks;
    }

    /** Fields of /proc/<pid>/stat after the command name, so index 0 is field 3 (state). */
    private static String[] statFields(long pid) {
        try {
            String stat = Files.readString(Path.of("/proc", Long.toString(pid), "stat"));
            return stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        } catch (IOException | RuntimeException gone) {
            return null; // the process exited meanwhile: its time is in its parent's cutime now
        }
    }

    static long parentOf(long pid) {
        String[] fields = statFields(pid);
        return fields == null ? -1 : Long.parseLong(fields[1]);
    }

    /** CPU seconds of one live process so far (with its reaped children's); 0 once it is gone. */
    static double cpuSecondsOf(long pid) {
        return statTicks(pid) / (double) CLOCK_TICKS_PER_SECOND;
    }

    /** utime + stime + cutime + cstime of one process. */
    private static long statTicks(long pid) {
        String[] fields = statFields(pid);
        if (fields == null) {
            return 0;
        }
        return Long.parseLong(fields[11]) + Long.parseLong(fields[12])
                + Long.parseLong(fields[13]) + Long.parseLong(fields[14]);
    }

    /** Resets this process's peak RSS (VmHWM) to its current RSS, so the next reading covers one scenario. */
    static void resetPeakRss() {
        try {
            Files.writeString(Path.of("/proc/self/clear_refs"), "5");
        } catch (IOException | RuntimeException notLinux) {
            // the peak then covers the whole run so far; the report says it is a JVM-wide peak anyway
        }
    }

    /** This JVM's peak resident set size in bytes since the last {@link #resetPeakRss()}, or -1 if unknown. */
    static long peakRssBytes() {
        return peakRssBytes(ProcessHandle.current().pid());
    }

    /** The peak resident set size of a live process in bytes, or -1 if unknown (or the process is gone). */
    static long peakRssBytes(long pid) {
        try {
            for (String line : Files.readAllLines(Path.of("/proc", Long.toString(pid), "status"))) {
                if (line.startsWith("VmHWM:")) {
                    return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
                }
            }
        } catch (IOException | RuntimeException notLinux) {
            return -1;
        }
        return -1;
    }

    /** CPU seconds of this JVM, of child JVMs and of PostgreSQL, at one moment or over a span. */
    record CpuTime(double jvmSeconds, double childrenSeconds, double postgresSeconds) {
        CpuTime minus(CpuTime earlier) {
            return new CpuTime(jvmSeconds - earlier.jvmSeconds, childrenSeconds - earlier.childrenSeconds,
                    postgresSeconds - earlier.postgresSeconds);
        }

        /** This with {@code seconds} more of child JVMs. */
        CpuTime plusChildren(double seconds) {
            return new CpuTime(jvmSeconds, childrenSeconds + seconds, postgresSeconds);
        }

        double totalSeconds() {
            return jvmSeconds + childrenSeconds + postgresSeconds;
        }
    }

    /** The system's one-minute load average now (all processes, not only this benchmark's). */
    static double loadAverageNow() {
        return ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage();
    }

    /** The one-minute load average at a scenario's start and end. */
    record LoadAverage(double atStart, double atEnd) {
        /** Ends the measurement that {@code atStart} began. */
        static LoadAverage since(double atStart) {
            return new LoadAverage(atStart, loadAverageNow());
        }

        @Override
        public String toString() {
            return String.format(Locale.ROOT, "%.1f -> %.1f", atStart, atEnd);
        }
    }
}
