package io.onceflow.tools.cli;

import io.onceflow.cli.ExitCode;
import io.onceflow.config.ConfigException;
import io.onceflow.job.OnceflowJob;
import java.io.IOException;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.jar.JarFile;
import java.util.jar.Manifest;

/**
 * {@code bin/onceflow run --jar JAR}: a team's job jar run on a local Flink, as {@code flink run}
 * would run it on a cluster. {@code bin/onceflow} puts the jar first on the classpath, followed by
 * Flink's jars (what a cluster provides), so the jar's own classes, the onceflow it bundles
 * included, are the ones that run. Its main class (the manifest's {@code Main-Class}) is called with
 * {@code --run-local} and the other arguments; without one, {@code OnceflowJob} runs, with
 * {@code processor.class}.
 */
final class JobJar {
    static final String OPTION = "jar";
    /** A class every jar that brings onceflow holds. */
    private static final String ONCEFLOW_CLASS_FILE = OnceflowJob.class.getName().replace('.', '/') + ".class";

    private final String path;
    private final String mainClass;

    private JobJar(String path, String mainClass) {
        this.path = path;
        this.mainClass = mainClass;
    }

    /**
     * The jar {@code --jar JAR} (or {@code --jar=JAR}) names among {@code args}, if any.
     *
     * @throws ConfigException if it is given twice, cannot be read or does not bring onceflow
     */
    static Optional<JobJar> named(String[] args) {
        List<String> paths = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--" + OPTION) && i + 1 < args.length) {
                paths.add(args[++i]);
            } else if (args[i].startsWith("--" + OPTION + "=")) {
                paths.add(args[i].substring(OPTION.length() + 3));
            } else if (args[i].equals("--" + OPTION)) {
                throw problem("has no value", "Name the job jar: run --jar target/my-job-1.0-job.jar.");
            }
        }
        if (paths.isEmpty()) {
            return Optional.empty();
        }
        if (paths.size() > 1) {
            throw problem("is given more than once", "Name one job jar.");
        }
        return Optional.of(open(paths.get(0)));
    }

    private static JobJar open(String path) {
        try (JarFile jar = new JarFile(path)) {
            if (jar.getEntry(ONCEFLOW_CLASS_FILE) == null) {
                throw problem("'" + path + "' does not bring onceflow", "Shade onceflow into the job jar, as"
                        + " examples/payments-ledger/pom.xml does: a Flink cluster has no onceflow of its own.");
            }
            Manifest manifest = jar.getManifest();
            String mainClass = manifest == null ? null : manifest.getMainAttributes().getValue("Main-Class");
            return new JobJar(path, mainClass == null ? OnceflowJob.class.getName() : mainClass.strip());
        } catch (IOException e) {
            throw problem("cannot read '" + path + "' (" + e + ")", "Name the job jar mvn package built.");
        }
    }

    private static ConfigException problem(String whatIsWrong, String whatToDo) {
        return new ConfigException(List.of(ConfigException.problem("--" + OPTION, whatIsWrong, whatToDo)));
    }

    /** {@code args} without {@code --jar JAR}. */
    static String[] withoutOption(String[] args) {
        List<String> rest = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--" + OPTION)) {
                i++;
            } else if (!args[i].startsWith("--" + OPTION + "=")) {
                rest.add(args[i]);
            }
        }
        return rest.toArray(String[]::new);
    }

    String mainClass() {
        return mainClass;
    }

    /**
     * Calls the jar's main class with {@code args} (which hold {@code --run-local}): in this JVM, so
     * its problems come back as exceptions (its main does not own the JVM, see {@code
     * CommandLineTool}) and end the process as {@code bin/onceflow}'s other commands do.
     *
     * @return {@link ExitCode#CLEAN} once the job ended
     */
    ExitCode run(String[] args) throws Exception {
        if (mainClass.equals(OnceflowJob.class.getName())) {
            return OnceflowJob.execute(args, Optional.empty());
        }
        Method main;
        try {
            main = Class.forName(mainClass).getMethod("main", String[].class);
        } catch (ClassNotFoundException | NoSuchMethodException e) {
            throw problem("its Main-Class " + mainClass + " is not on this JVM's classpath or has no main(String[])",
                    "Run it through bin/onceflow run --jar " + path + ", which puts the jar on the classpath.");
        }
        try {
            main.invoke(null, (Object) args);
        } catch (InvocationTargetException e) {
            // what the main method threw, as if called directly
            if (e.getCause() instanceof Error error) {
                throw error;
            }
            throw (Exception) e.getCause();
        }
        return ExitCode.CLEAN;
    }
}
