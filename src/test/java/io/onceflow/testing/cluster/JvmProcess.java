package io.onceflow.testing.cluster;

import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalInt;
import java.util.concurrent.TimeUnit;

/**
 * A service started as its own JVM (a Flink JobManager or TaskManager, a Kafka broker, the audit
 * command), with stdout and stderr in a log file. {@link #kill()} is {@code kill -9}: the process gets
 * no chance to clean up, exactly as when a machine or container dies.
 */
public final class JvmProcess {
    private final String name;
    private final Process process;
    private final Path log;

    private JvmProcess(String name, Process process, Path log) {
        this.name = name;
        this.process = process;
        this.log = log;
    }

    /**
     * Starts {@code java [jvmOptions] -cp classpath mainClass [args]} with the JDK running this JVM.
     *
     * @param log where the process's stdout and stderr go (appended, so a restarted service keeps one log)
     */
    public static JvmProcess start(String name, List<String> jvmOptions, String classpath, String mainClass,
            List<String> args, Path log) {
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.addAll(jvmOptions);
        command.add("-cp");
        command.add(classpath);
        command.add(mainClass);
        command.addAll(args);
        try {
            Process process = new ProcessBuilder(command)
                    .redirectErrorStream(true)
                    .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()))
                    .start();
            return new JvmProcess(name, process, log);
        } catch (IOException e) {
            throw new IllegalStateException("could not start " + name, e);
        }
    }

    /** Runs a JVM to completion and returns its exit code; kills it after {@code timeout}. */
    public static int run(String name, List<String> jvmOptions, String classpath, String mainClass, List<String> args,
            Path log, Duration timeout) {
        JvmProcess jvm = start(name, jvmOptions, classpath, mainClass, args, log);
        try {
            if (!jvm.process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
                jvm.kill();
                throw new IllegalStateException(name + " did not finish within " + timeout + "; see " + log);
            }
            return jvm.process.exitValue();
        } catch (InterruptedException e) {
            jvm.kill();
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while waiting for " + name, e);
        }
    }

    public String name() {
        return name;
    }

    public long pid() {
        return process.pid();
    }

    public Path log() {
        return log;
    }

    public boolean isAlive() {
        return process.isAlive();
    }

    /** The exit status once the process has ended (and been reaped); empty while it runs. */
    public OptionalInt exitValue() {
        return process.isAlive() ? OptionalInt.empty() : OptionalInt.of(process.exitValue());
    }

    /**
     * SIGSTOP: the whole process freezes, as in a long GC pause, a frozen VM or a host cut off the
     * network, while its sockets stay open. Peers see a silent, not a dead, process.
     */
    public void pause() {
        signal("STOP");
    }

    /** SIGCONT: a paused process runs on from where it stopped, unaware of the time that passed. */
    public void resume() {
        signal("CONT");
    }

    private void signal(String signal) {
        try {
            Process kill = new ProcessBuilder("kill", "-" + signal, String.valueOf(pid())).inheritIO().start();
            if (!kill.waitFor(10, TimeUnit.SECONDS) || kill.exitValue() != 0) {
                throw new IllegalStateException("kill -" + signal + " " + this + " failed");
            }
        } catch (IOException e) {
            throw new IllegalStateException("could not send SIG" + signal + " to " + this, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while signalling " + this, e);
        }
    }

    /** SIGKILL, then waits until the operating system has reaped the process. */
    public void kill() {
        process.destroyForcibly(); // also ends a paused process: SIGKILL needs no cooperation
        awaitExit(Duration.ofSeconds(30));
    }

    /** SIGTERM (the service's shutdown hooks run), then SIGKILL if it is still there after {@code grace}. */
    public void stop(Duration grace) {
        process.destroy();
        if (!awaitExit(grace)) {
            kill();
        }
    }

    private boolean awaitExit(Duration timeout) {
        try {
            return process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    @Override
    public String toString() {
        return name + " (pid " + pid() + ")";
    }
}
