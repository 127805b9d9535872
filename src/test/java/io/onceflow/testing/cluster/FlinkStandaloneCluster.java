package io.onceflow.testing.cluster;

import io.onceflow.sink.postgres.internal.ProtocolHooks;
import io.onceflow.testing.Eventually;
import java.io.File;
import java.io.IOException;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.apache.commons.io.FileUtils;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.CoreOptions;
import org.apache.flink.configuration.GlobalConfiguration;
import org.apache.flink.configuration.HeartbeatManagerOptions;

/**
 * A Flink 2.2 standalone session cluster as users run it: one JobManager and any number of
 * TaskManagers, each its own JVM, started the way Flink's {@code bin/jobmanager.sh} and
 * {@code bin/taskmanager.sh} start them (memory flags computed by {@code BashJavaUtils}, JVM options
 * from {@code env.java.opts.*}, log4j from the configuration directory).
 *
 * <p>The configuration is the project's {@code flink-conf/} as it is, copied to a temporary
 * directory with only test-specific overrides appended: loopback addresses, free ports, directories,
 * slots and memory.
 */
public final class FlinkStandaloneCluster implements AutoCloseable {
    private static final String JOB_MANAGER_MAIN = "org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint";
    private static final String APPLICATION_JOB_MANAGER_MAIN =
            "org.apache.flink.container.entrypoint.StandaloneApplicationClusterEntryPoint";
    private static final String TASK_MANAGER_MAIN = "org.apache.flink.runtime.taskexecutor.TaskManagerRunner";
    private static final String BASH_JAVA_UTILS = "org.apache.flink.runtime.util.bash.BashJavaUtils";
    private static final String RESULT_PREFIX = "BASH_JAVA_UTILS_EXEC_RESULT:";
    /** Each process gets a free port of its own rather than the range config.yaml gives. */
    private static final String METRICS_PORT = "metrics.reporter.prom.port";
    private static final Duration START_TIMEOUT = Duration.ofSeconds(90);

    private final Path directory;
    private final Path confDir;
    private final int restPort = ServiceClasspath.freePort();
    private final FlinkRestClient rest;
    private final List<TaskManager> taskManagers = new ArrayList<>();
    private JvmProcess jobManager;
    private final int jobManagerMetricsPort = ServiceClasspath.freePort();
    /**
     * Chosen like the REST port rather than left to the OS: an ephemeral BLOB port, bound just before
     * the REST endpoint, was once the free port picked for REST ("Could not start rest endpoint").
     */
    private final int blobPort = portOtherThan(restPort, jobManagerMetricsPort);
    private int taskManagersStarted;
    private int jobManagersStarted;
    /** The job that the JobManager runs in application mode; null for a session cluster. */
    private final Application application;

    /**
     * A job in application mode, as Flink's {@code standalone-job.sh} and the Kubernetes operator run
     * it: each JobManager runs {@code mainClass} from {@code jar} with {@code programArgs}, the job's id
     * fixed to {@code jobId} (what the operator sets for each deployment).
     */
    public record Application(String mainClass, Path jar, String jobId, List<String> programArgs) {}

    /**
     * A running TaskManager: its resource id (as the REST API shows it), process, working directory and
     * the port of its Prometheus reporter.
     */
    public record TaskManager(String resourceId, JvmProcess process, Path directory, int metricsPort) {}

    private FlinkStandaloneCluster(Path directory, Application application) {
        this.directory = directory;
        this.application = application;
        this.confDir = directory.resolve("conf");
        this.rest = new FlinkRestClient(URI.create("http://127.0.0.1:" + restPort));
    }

    /**
     * Starts a JobManager and {@code taskManagers} TaskManagers with {@code slotsPerTaskManager} slots
     * each, configured from {@code projectConf} (the project's {@code flink-conf/}).
     */
    public static FlinkStandaloneCluster start(Path directory, Path projectConf, int taskManagers,
            int slotsPerTaskManager) {
        return start(directory, projectConf, Map.of(), taskManagers, slotsPerTaskManager);
    }

    /**
     * As {@link #start(Path, Path, int, int)}, with {@code settings} added to the configuration (such
     * as high availability, so that {@link #restartJobManager} recovers the session's jobs).
     */
    public static FlinkStandaloneCluster start(Path directory, Path projectConf, Map<String, String> settings,
            int taskManagers, int slotsPerTaskManager) {
        return start(new FlinkStandaloneCluster(directory, null), projectConf, settings, taskManagers,
                slotsPerTaskManager);
    }

    /**
     * Starts a cluster in application mode that runs {@code application}, with {@code settings}
     * added to the configuration (such as high availability, so that {@link #restartJobManager}
     * recovers the job).
     */
    public static FlinkStandaloneCluster startApplication(Path directory, Path projectConf, Map<String, String> settings,
            Application application, int taskManagers, int slotsPerTaskManager) {
        return start(new FlinkStandaloneCluster(directory, application), projectConf, settings, taskManagers,
                slotsPerTaskManager);
    }

    private static FlinkStandaloneCluster start(FlinkStandaloneCluster cluster, Path projectConf,
            Map<String, String> settings, int taskManagers, int slotsPerTaskManager) {
        cluster.writeConfiguration(projectConf, settings, slotsPerTaskManager);
        cluster.startJobManager();
        for (int i = 0; i < taskManagers; i++) {
            cluster.startTaskManager();
        }
        cluster.awaitTaskManagers(taskManagers);
        return cluster;
    }

    private void writeConfiguration(Path projectConf, Map<String, String> settings, int slotsPerTaskManager) {
        Map<String, String> overrides = new LinkedHashMap<>();
        overrides.put("jobmanager.rpc.address", "127.0.0.1");
        overrides.put("jobmanager.rpc.port", String.valueOf(ServiceClasspath.freePort()));
        overrides.put("jobmanager.bind-host", "127.0.0.1");
        overrides.put("taskmanager.bind-host", "127.0.0.1");
        overrides.put("taskmanager.host", "127.0.0.1");
        overrides.put("rest.address", "127.0.0.1");
        overrides.put("rest.bind-address", "127.0.0.1");
        overrides.put("rest.port", String.valueOf(restPort));
        // the tests submit jars over REST (FlinkRestClient.uploadJar), which flink-conf/ turns off; this REST
        // endpoint listens on the loopback interface only
        overrides.put("web.submit.enable", "true");
        overrides.put("blob.server.port", String.valueOf(blobPort));
        overrides.put("taskmanager.rpc.port", "0");
        overrides.put("taskmanager.data.port", "0");
        overrides.put("jobmanager.memory.process.size", "1024m");
        overrides.put("taskmanager.memory.process.size", "1536m");
        overrides.put("taskmanager.numberOfTaskSlots", String.valueOf(slotsPerTaskManager));
        overrides.put("execution.checkpointing.dir", directory.resolve("checkpoints").toUri().toString());
        overrides.put("execution.checkpointing.savepoint-dir", savepointDirectory());
        overrides.put("web.upload.dir", directory.resolve("web-upload").toString());
        overrides.put("io.tmp.dirs", directory.resolve("jobmanager-tmp").toString());
        // where application mode copies the job jar: by default /opt/flink/artifacts, shared by every
        // run on the machine, and a copy already there is not replaced (a later run used an older jar)
        overrides.put("user.artifacts.base-dir", directory.resolve("artifacts").toString());
        overrides.putAll(settings);
        try {
            Files.createDirectories(confDir);
            FileUtils.copyDirectory(projectConf.toFile(), confDir.toFile());
            // Flink's YAML parser rejects a key that appears twice, so the project's line for an
            // overridden key is commented out in the copy rather than deleted: the copy stays readable.
            StringBuilder config = new StringBuilder();
            for (String line : Files.readAllLines(confDir.resolve("config.yaml"))) {
                int colon = line.indexOf(':');
                boolean overridden = colon > 0 && overrides.containsKey(line.substring(0, colon).strip())
                        && !line.startsWith(" ");
                config.append(overridden ? "# overridden below: " : "").append(line).append('\n');
            }
            config.append("\n# --- test overrides appended by ").append(getClass().getSimpleName()).append(" ---\n");
            overrides.forEach((key, value) -> config.append(key).append(": ").append(value).append('\n'));
            Files.writeString(confDir.resolve("config.yaml"), config);
        } catch (IOException e) {
            throw new IllegalStateException("could not prepare the Flink configuration in " + confDir, e);
        }
    }

    /** The cluster's configuration directory (the project's flink-conf/ with the overrides), e.g. for Flink's CLI. */
    public Path configurationDirectory() {
        return confDir;
    }

    /** The directory holding the cluster's {@code checkpoints/} and {@code savepoints/}. */
    public Path stateDirectory() {
        return directory;
    }

    public String savepointDirectory() {
        return directory.resolve("savepoints").toUri().toString();
    }

    /** The port where the JobManager's Prometheus reporter serves {@code /metrics}. */
    public int jobManagerMetricsPort() {
        return jobManagerMetricsPort;
    }

    public FlinkRestClient rest() {
        return rest;
    }

    public boolean jobManagerAlive() {
        return jobManager.isAlive();
    }

    /** The current JobManager's log file. */
    public Path jobManagerLog() {
        return logDirectory().resolve(jobManager.name() + ".log");
    }

    /** {@code kill -9} of the JobManager. */
    public void killJobManager() {
        jobManager.kill();
    }

    /**
     * Starts a new JobManager process, after {@link #killJobManager}, on a new RPC port (with high
     * availability the TaskManagers find it through the leader election) and the same REST port.
     */
    public void restartJobManager() {
        if (jobManager.isAlive()) {
            throw new IllegalStateException("the JobManager still runs: kill it first");
        }
        startJobManager();
    }

    private void startJobManager() {
        String name = ++jobManagersStarted == 1 ? "jobmanager" : "jobmanager-" + jobManagersStarted;
        List<String> options = new ArrayList<>(List.of("-D", METRICS_PORT + "=" + jobManagerMetricsPort));
        if (jobManagersStarted > 1) {
            options.addAll(List.of("-D", "jobmanager.rpc.port=" + ServiceClasspath.freePort()));
        }
        if (application == null) {
            // the entrypoint stops reading options at this one: what follows it is ignored
            options.addAll(List.of("--executionMode", "cluster"));
            jobManager = startFlinkProcess(name, JOB_MANAGER_MAIN, "GET_JM_RESOURCE_PARAMS",
                    CoreOptions.FLINK_JM_JVM_OPTIONS, directory, options, List.of());
        } else {
            options.addAll(List.of("--job-classname", application.mainClass(),
                    "--jars", application.jar().toAbsolutePath().toUri().toString(), "--job-id", application.jobId()));
            // The program's arguments come last, after "--": the entrypoint's parser takes a prefix of
            // its own long options for the option (onceflow's --config would set --configDir).
            List<String> programArgs = new ArrayList<>(List.of("--"));
            programArgs.addAll(application.programArgs());
            jobManager = startFlinkProcess(name, APPLICATION_JOB_MANAGER_MAIN, "GET_JM_RESOURCE_PARAMS",
                    CoreOptions.FLINK_JM_JVM_OPTIONS, directory, options, programArgs);
        }
        boolean up = holdsWithin(START_TIMEOUT, () -> {
            try {
                rest.taskManagers();
                return true;
            } catch (IOException notYet) {
                if (!jobManager.isAlive()) {
                    throw restApiDidNotComeUp();
                }
                return false;
            }
        });
        if (!up) {
            throw restApiDidNotComeUp();
        }
    }

    private IllegalStateException restApiDidNotComeUp() {
        // the harness deletes the logs on close: the evidence goes into the message
        return new IllegalStateException("the JobManager's REST API did not come up; the end of its"
                + " output:\n" + tail(jobManager.log(), 30) + "\nand of its log:\n" + tail(jobManagerLog(), 60));
    }

    /** Starts one more TaskManager (a fresh process with a new resource id and working directory). */
    public TaskManager startTaskManager() {
        String resourceId = "taskmanager-" + (++taskManagersStarted);
        Path tmDirectory = directory.resolve(resourceId);
        int metricsPort = ServiceClasspath.freePort();
        JvmProcess process = startFlinkProcess(resourceId, TASK_MANAGER_MAIN, "GET_TM_RESOURCE_PARAMS",
                CoreOptions.FLINK_TM_JVM_OPTIONS, tmDirectory,
                List.of("-D", "taskmanager.resource-id=" + resourceId, "-D", "io.tmp.dirs=" + tmDirectory.resolve("tmp"),
                        "-D", METRICS_PORT + "=" + metricsPort), List.of());
        TaskManager taskManager = new TaskManager(resourceId, process, tmDirectory, metricsPort);
        taskManagers.add(taskManager);
        return taskManager;
    }

    /** {@code kill -9} of a TaskManager; its working directory (spilled files, RocksDB) is deleted as a new machine would not have it. */
    public void kill(TaskManager taskManager) {
        taskManager.process().kill();
        taskManagers.remove(taskManager);
        FileUtils.deleteQuietly(taskManager.directory().toFile());
    }

    /**
     * Copies the JobManagers' and TaskManagers' logs to {@code target}, which outlives the harness: the
     * evidence of a failed run, since the harness deletes its directory on close.
     */
    public void copyLogsTo(Path target) throws IOException {
        FileUtils.copyDirectory(logDirectory().toFile(), target.toFile());
    }

    private Path logDirectory() {
        Path logs = directory.resolve("logs");
        try {
            Files.createDirectories(logs);
        } catch (IOException e) {
            throw new IllegalStateException("could not create " + logs, e);
        }
        return logs;
    }

    /** How many lines of every JobManager and TaskManager log so far, also of killed ones, contain {@code text}. */
    public long logLinesContaining(String text) {
        return logLinesContaining(text, "");
    }

    /** As {@link #logLinesContaining(String)}, in the TaskManagers' logs only. */
    public long taskManagerLogLinesContaining(String text) {
        return logLinesContaining(text, "taskmanager-");
    }

    /** As {@link #logLinesContaining(String)}, in {@code taskManager}'s log only. */
    public long logLinesContaining(TaskManager taskManager, String text) {
        return logLinesContaining(text, taskManager.resourceId() + ".log");
    }

    private long logLinesContaining(String text, String logNamePrefix) {
        try (Stream<Path> logs = Files.list(logDirectory())) {
            return logs.filter(log -> log.getFileName().toString().startsWith(logNamePrefix)
                    && log.getFileName().toString().endsWith(".log")).mapToLong(log -> {
                try (Stream<String> lines = Files.lines(log)) {
                    return lines.filter(line -> line.contains(text)).count();
                } catch (IOException | java.io.UncheckedIOException unreadable) {
                    return 0;
                }
            }).sum();
        } catch (IOException e) {
            throw new IllegalStateException("could not list " + logDirectory(), e);
        }
    }

    /** Where a test arms a {@link MarkerFilePause} of this cluster's processes (they read it at every protocol step). */
    /** A class-path directory with the cluster's process hook alone ({@link MarkerFilePause}). */
    private Path processHookClasses() {
        try {
            return MarkerFilePause.copyTo(directory.resolve("process-hook-classes"));
        } catch (IOException e) {
            throw new IllegalStateException("could not copy the process hook", e);
        }
    }

    public Path pausePoints() {
        Path pausePoints = directory.resolve("pause-points");
        try {
            return Files.createDirectories(pausePoints);
        } catch (IOException e) {
            throw new IllegalStateException("could not create " + pausePoints, e);
        }
    }

    /** How long the JobManager waits for a silent TaskManager before it declares it lost. */
    public Duration heartbeatTimeout() {
        return GlobalConfiguration.loadConfiguration(confDir.toString()).get(HeartbeatManagerOptions.HEARTBEAT_TIMEOUT);
    }

    public List<TaskManager> taskManagers() {
        return List.copyOf(taskManagers);
    }

    /** Waits until {@code count} TaskManagers are registered with the JobManager. */
    public void awaitTaskManagers(int count) {
        boolean registered = holdsWithin(START_TIMEOUT, () -> {
            try {
                return rest.taskManagers().size() >= count;
            } catch (IOException e) {
                return false; // the JobManager is busy; ask again
            }
        });
        if (!registered) {
            throw new IllegalStateException(count + " TaskManagers did not register within " + START_TIMEOUT);
        }
    }

    private JvmProcess startFlinkProcess(String name, String mainClass, String resourceCommand,
            ConfigOption<String> roleJvmOptions, Path workDirectory, List<String> options, List<String> programArgs) {
        try {
            Files.createDirectories(workDirectory.resolve("tmp"));
        } catch (IOException e) {
            throw new IllegalStateException("could not create " + workDirectory, e);
        }
        List<String> resourceParams = resourceParams(resourceCommand, workDirectory);
        Configuration conf = GlobalConfiguration.loadConfiguration(confDir.toString());
        List<String> jvmOptions = new ArrayList<>(splitOptions(resourceParams.get(0)));
        jvmOptions.addAll(splitOptions(conf.get(CoreOptions.FLINK_JVM_OPTIONS)));
        jvmOptions.addAll(splitOptions(conf.get(roleJvmOptions)));
        // logs outside the working directory, which kill() deletes: they are evidence after the run
        jvmOptions.add("-Dlog.file=" + logDirectory().resolve(name + ".log"));
        jvmOptions.add("-Dlog4j.configurationFile=" + confDir.resolve("log4j.properties").toUri());
        jvmOptions.add("-Djava.io.tmpdir=" + workDirectory.resolve("tmp"));
        jvmOptions.add("-D" + ProtocolHooks.PROCESS_HOOK_PROPERTY + "=" + MarkerFilePause.class.getName());
        jvmOptions.add("-D" + MarkerFilePause.DIRECTORY_PROPERTY + "=" + pausePoints());
        List<String> args = new ArrayList<>(List.of("--configDir", confDir.toString()));
        args.addAll(options);
        args.addAll(splitOptions(resourceParams.get(1)));
        args.addAll(programArgs);
        return JvmProcess.start(name, jvmOptions, ServiceClasspath.flink() + File.pathSeparator + processHookClasses(),
                mainClass, args, logDirectory().resolve(name + ".out"));
    }

    /**
     * The memory flags and dynamic properties Flink's scripts compute with {@code BashJavaUtils}: line
     * one is the JVM's heap, direct and metaspace limits, line two the derived memory settings.
     */
    private List<String> resourceParams(String command, Path workDirectory) {
        Path output = workDirectory.resolve(command.toLowerCase() + ".out");
        int exit = JvmProcess.run("BashJavaUtils " + command, List.of("-Xmx128m"), ServiceClasspath.flink(),
                BASH_JAVA_UTILS, List.of(command, "--configDir", confDir.toString()), output, Duration.ofSeconds(60));
        try {
            List<String> results = Files.readAllLines(output).stream()
                    .filter(line -> line.startsWith(RESULT_PREFIX))
                    .map(line -> line.substring(RESULT_PREFIX.length()))
                    .toList();
            if (exit != 0 || results.size() < 2) {
                throw new IllegalStateException("BashJavaUtils " + command + " failed: " + Files.readString(output));
            }
            return results.subList(results.size() - 2, results.size());
        } catch (IOException e) {
            throw new IllegalStateException("could not read " + output, e);
        }
    }

    /** The last {@code lines} lines of {@code file}, or why it cannot be read. */
    public static String tail(Path file, int lines) {
        try {
            List<String> all = Files.readAllLines(file);
            return String.join("\n", all.subList(Math.max(0, all.size() - lines), all.size()));
        } catch (IOException | java.io.UncheckedIOException e) {
            return "(" + file + " cannot be read: " + e + ")";
        }
    }

    private static List<String> splitOptions(String options) {
        return options == null ? List.of() : Arrays.stream(options.trim().split("\\s+")).filter(s -> !s.isEmpty()).toList();
    }

    /** {@link Eventually#holdsWithin}, polling every 300 ms, for this class's methods that throw no checked exception. */
    private static boolean holdsWithin(Duration timeout, Eventually.Condition<RuntimeException> condition) {
        try {
            return Eventually.holdsWithin(timeout, Duration.ofMillis(300), condition);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        }
    }

    /** Kills every process of the cluster; the harness deletes the directories. */
    @Override
    public void close() {
        Stream.concat(taskManagers.stream().map(TaskManager::process), Stream.ofNullable(jobManager))
                .forEach(JvmProcess::kill);
        taskManagers.clear();
    }

    private static int portOtherThan(int... taken) {
        while (true) {
            int port = ServiceClasspath.freePort();
            if (Arrays.stream(taken).noneMatch(other -> other == port)) {
                return port;
            }
        }
    }
}
