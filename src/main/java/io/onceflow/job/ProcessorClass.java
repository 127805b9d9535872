package io.onceflow.job;

import io.onceflow.config.ConfigException;
import io.onceflow.config.InvalidValueException;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.config.ProgramArguments;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Modifier;
import java.util.List;
import java.util.Optional;
import java.util.function.Function;
import org.apache.flink.annotation.Internal;

/**
 * The class {@code processor.class} names, which only the job loads (the configuration keeps its
 * name, so that the audit and other tools need not have the class): checked while the job's
 * configuration is read, so that its problems are reported with the others ({@link
 * ProgramArguments#jobConfig}), then created.
 */
@Internal
public final class ProcessorClass {
    private static final String KEY = "processor.class";

    private ProcessorClass() {}

    /**
     * Returns a parser of class names to classes the job can create: found by the thread's context
     * class loader (Flink's user-code class loader while a job's main method runs), implementing
     * {@code type}, public, concrete and with a public no-argument constructor. The class is not
     * initialised.
     *
     * @param type the type the class must implement ({@code io.onceflow.api.EventProcessor})
     * @return the parser; it throws {@link InvalidValueException} saying what is wrong and what to do
     */
    public static <T> Function<String, Class<? extends T>> implementationOf(Class<T> type) {
        return name -> {
            Class<?> found;
            try {
                found = Class.forName(name, false, classLoader());
            } catch (ClassNotFoundException e) {
                throw new InvalidValueException(
                        "class '" + name + "' is not on the job's classpath",
                        "Fix the name (a nested class is written package.Outer$Inner), or pack the class"
                                + " into the job jar (in Flink's lib/ directory it cannot see onceflow's classes).");
            } catch (LinkageError e) {
                throw new InvalidValueException(
                        "class '" + name + "' cannot be loaded (" + e + ")",
                        "Put the jars it depends on into the job jar or Flink's lib/ directory.");
            }
            if (!type.isAssignableFrom(found)) {
                throw new InvalidValueException(
                        "'" + name + "' does not implement " + type.getName(),
                        "Name a class that implements " + type.getName() + ".");
            }
            int modifiers = found.getModifiers();
            if (!Modifier.isPublic(modifiers) || Modifier.isAbstract(modifiers)) {
                throw new InvalidValueException(
                        "'" + name + "' is not a public concrete class",
                        "Make it public and not abstract, or name a subclass that is.");
            }
            try {
                found.getConstructor();
            } catch (NoSuchMethodException e) {
                throw new InvalidValueException(
                        "'" + name + "' has no public constructor without parameters",
                        "Add one: the job creates the instance with it (a nested class must also be"
                                + " static).");
            }
            return found.asSubclass(type);
        };
    }

    /**
     * Creates an instance of the class {@code processor.class} names, with its public no-argument
     * constructor.
     *
     * @param type the type the class must implement ({@code io.onceflow.api.EventProcessor})
     * @return a new instance; empty when {@code processor.class} is not set
     * @throws ConfigException naming {@code processor.class}, when the class cannot be used or its
     *     constructor throws
     */
    public static <T> Optional<T> newInstance(OnceflowConfig config, Class<T> type) {
        if (config.processorClass().isEmpty()) {
            return Optional.empty();
        }
        String name = config.processorClass().get();
        Class<? extends T> implementation;
        try {
            implementation = implementationOf(type).apply(name);
        } catch (InvalidValueException e) {
            throw new ConfigException(List.of(ConfigException.problem(KEY, e.whatIsWrong(), e.whatToDo())));
        }
        try {
            return Optional.of(implementation.getConstructor().newInstance());
        } catch (InvocationTargetException | ExceptionInInitializerError e) {
            throw new ConfigException(List.of(ConfigException.problem(
                    KEY,
                    "creating " + name + " threw " + e.getCause(),
                    "Fix its constructor or static initialisation; the job creates the processor before it"
                            + " starts.")));
        } catch (ReflectiveOperationException e) {
            // the checks above make this unreachable short of a class that changed under the job
            throw new IllegalStateException("cannot create " + name, e);
        }
    }

    private static ClassLoader classLoader() {
        ClassLoader context = Thread.currentThread().getContextClassLoader();
        return context != null ? context : ProcessorClass.class.getClassLoader();
    }
}
