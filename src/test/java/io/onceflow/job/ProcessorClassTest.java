package io.onceflow.job;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.onceflow.config.ConfigException;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.config.ProgramArguments;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The class {@code processor.class} names, as the job checks it while reading its configuration and
 * creates it. {@link Runnable} stands in for the job's {@code EventProcessor}: the check works for
 * any type.
 */
class ProcessorClassTest {
    private static ProgramArguments arguments(String... extra) {
        List<String> args = new ArrayList<>();
        OnceflowJobTest.REQUIRED.forEach((key, value) -> args.addAll(List.of("--" + key, value)));
        args.addAll(List.of(extra));
        return ProgramArguments.parse(args.toArray(String[]::new), Set.of(), Set.of());
    }

    private static List<String> jobConfigProblems(boolean processorGiven, String... extra) {
        try {
            arguments(extra).jobConfig(Map.of(), ProcessorClass.implementationOf(Runnable.class), processorGiven);
        } catch (ConfigException e) {
            return e.problems();
        }
        throw new AssertionError("expected a ConfigException");
    }

    @Test
    void aClassThatFitsIsCheckedAndCreated() {
        OnceflowConfig config = arguments("--processor.class", "java.lang.Thread")
                .jobConfig(Map.of(), ProcessorClass.implementationOf(Runnable.class), false);

        assertThat(config.processorClass()).contains("java.lang.Thread");
        assertThat(ProcessorClass.newInstance(config, Runnable.class)).containsInstanceOf(Thread.class);
        assertThat(config.redactedMap()).containsEntry("processor.class", "java.lang.Thread");
    }

    @Test
    void withoutTheSettingThereIsNoProcessorToCreate() {
        OnceflowConfig config = arguments().jobConfig(Map.of(), ProcessorClass.implementationOf(Runnable.class), false);

        assertThat(ProcessorClass.newInstance(config, Runnable.class)).isEmpty();
    }

    static Stream<Arguments> unfitClasses() {
        return Stream.of(
                Arguments.of("com.example.NoSuchProcessor",
                        "processor.class: class 'com.example.NoSuchProcessor' is not on the job's classpath. Fix the"
                                + " name (a nested class is written package.Outer$Inner), or pack the class into the job"
                                + " jar (in Flink's lib/ directory it cannot see onceflow's classes)."),
                Arguments.of("java.lang.String",
                        "processor.class: 'java.lang.String' does not implement java.lang.Runnable. Name a class that"
                                + " implements java.lang.Runnable."),
                Arguments.of("java.util.TimerTask",
                        "processor.class: 'java.util.TimerTask' is not a public concrete class. Make it public and"
                                + " not abstract, or name a subclass that is."),
                Arguments.of("java.util.concurrent.FutureTask",
                        "processor.class: 'java.util.concurrent.FutureTask' has no public constructor without"
                                + " parameters. Add one: the job creates the instance with it (a nested class must"
                                + " also be static)."));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("unfitClasses")
    void anUnfitClassIsReportedWithTheOtherProblems(String className, String problem) {
        assertThat(jobConfigProblems(false, "--processor.class", className, "--parallelism", "0"))
                .containsExactlyInAnyOrder(problem,
                        "parallelism: '0' is not a whole number from 1 to 32768. Use a whole number from 1 to 32768.");
    }

    @Test
    void onlyTheJobLoadsTheClassSoTheAuditNeedNotHaveIt() {
        OnceflowConfig config = arguments("--processor.class", "com.example.NoSuchProcessor").config(Map.of());

        assertThat(config.processorClass()).contains("com.example.NoSuchProcessor");
        assertThatThrownBy(() -> ProcessorClass.newInstance(config, Runnable.class))
                .isInstanceOf(ConfigException.class)
                .hasMessageContaining("processor.class: class 'com.example.NoSuchProcessor' is not on the job's classpath");
    }

    @Test
    void aProcessorGivenInCodeAndOneInTheSettingsContradictEachOther() {
        assertThat(jobConfigProblems(true, "--processor.class", "java.lang.Thread"))
                .containsExactly("processor.class: is set, but the job was started with a processor of its own"
                        + " (Onceflow.run(args, processor)). Remove processor.class from the settings, or start the"
                        + " job with OnceflowJob.main so that it applies.");
        assertThat(arguments().jobConfig(Map.of(), ProcessorClass.implementationOf(Runnable.class), true).processorClass())
                .isEmpty();
    }

    @Test
    void aConstructorThatThrowsIsReportedWithTheSetting() {
        OnceflowConfig config = arguments("--processor.class", ThrowingConstructor.class.getName())
                .jobConfig(Map.of(), ProcessorClass.implementationOf(Runnable.class), false);

        assertThatThrownBy(() -> ProcessorClass.newInstance(config, Runnable.class))
                .isInstanceOf(ConfigException.class)
                .extracting(e -> ((ConfigException) e).problems())
                .asList()
                .containsExactly("processor.class: creating " + ThrowingConstructor.class.getName() + " threw"
                        + " java.lang.IllegalStateException: rates.url is not set. Fix its constructor or static"
                        + " initialisation; the job creates the processor before it starts.");
    }

    /** A processor whose constructor fails, as one reading its own settings might. */
    public static final class ThrowingConstructor implements Runnable {
        public ThrowingConstructor() {
            throw new IllegalStateException("rates.url is not set");
        }

        @Override
        public void run() {}
    }
}
