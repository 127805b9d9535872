package io.onceflow.testing.cluster;

import java.io.File;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Collectors;

/**
 * What the service JVMs run on: the jars Maven resolved for this test JVM (Flink, flink-runtime-web,
 * Kafka's broker, logging) without the project's own classes, so the job's code reaches the cluster
 * only through the submitted job jar, as on a user's cluster. Also hands out free loopback ports.
 */
public final class ServiceClasspath {
    private ServiceClasspath() {}

    /** Failsafe and surefire run in the project directory. */
    private static final Path PROJECT_TARGET = Path.of("target").toAbsolutePath().normalize();

    /**
     * Jars that the job jar bundles and a Flink distribution's {@code lib/} does not have. On the
     * cluster's classpath as well they would be loaded twice (Flink's child-first user class loader
     * and the parent) and fail with loader constraint violations, which a user's cluster never sees.
     */
    private static final List<String> BUNDLED_IN_JOB_JAR = List.of(
            "/org/apache/kafka/", "/flink-connector-kafka/", "/org/postgresql/", "/com/fasterxml/jackson/");

    /** The test JVM's classpath minus the project's own build output: what the Kafka broker needs. */
    public static String dependencies() {
        return String.join(File.pathSeparator, dependencyEntries());
    }

    /** The classpath of Flink's JVMs: like a Flink distribution, without what the job jar brings. */
    public static String flink() {
        return dependencyEntries().stream()
                .filter(entry -> BUNDLED_IN_JOB_JAR.stream().noneMatch(entry.replace(File.separatorChar, '/')::contains))
                .collect(Collectors.joining(File.pathSeparator));
    }

    private static List<String> dependencyEntries() {
        return Arrays.stream(System.getProperty("java.class.path").split(File.pathSeparator))
                .filter(entry -> !isProjectOutput(Path.of(entry)))
                .toList();
    }

    /** The project's build output: target/classes, target/test-classes, or the jar failsafe puts there instead. */
    private static boolean isProjectOutput(Path entry) {
        return entry.toAbsolutePath().normalize().startsWith(PROJECT_TARGET);
    }

    /**
     * A port nobody listens on now. The small window before the service binds it is acceptable in
     * tests; fixed ports are not, because other processes on the machine may hold them.
     */
    public static int freePort() {
        try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            socket.setReuseAddress(true);
            return socket.getLocalPort();
        } catch (IOException e) {
            throw new IllegalStateException("no free port", e);
        }
    }
}
