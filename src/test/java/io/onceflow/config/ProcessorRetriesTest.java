package io.onceflow.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

class ProcessorRetriesTest {
    @Test
    void thePauseDoublesFromTheBackoffUpToTheMaximum() {
        ProcessorRetries retries = new ProcessorRetries(3, Duration.ofMillis(100), Duration.ofMillis(500));

        assertThat(IntStream.rangeClosed(1, 6).mapToObj(retries::pauseBeforeRetry).map(Duration::toMillis))
                .containsExactly(100L, 200L, 400L, 500L, 500L, 500L);
        // the only cost of a very late retry of a transient failure is a bounded loop
        assertThat(retries.pauseBeforeRetry(Integer.MAX_VALUE)).isEqualTo(Duration.ofMillis(500));
    }

    @Test
    void theAttemptsOfAFailingEventPauseBetweenEachTwo() {
        assertThat(new ProcessorRetries(3, Duration.ofMillis(100), Duration.ofSeconds(10)).pausesOfAFailingEvent())
                .isEqualTo(Duration.ofMillis(300));
        assertThat(new ProcessorRetries(1, Duration.ofMillis(100), Duration.ofSeconds(10)).pausesOfAFailingEvent())
                .isZero();
    }

    @Test
    void refusesSettingsTheConfigurationWouldRefuse() {
        assertThatThrownBy(() -> new ProcessorRetries(0, Duration.ofMillis(1), Duration.ofMillis(1)))
                .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new ProcessorRetries(3, Duration.ZERO, Duration.ofMillis(1)))
                .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new ProcessorRetries(3, Duration.ofMillis(2), Duration.ofMillis(1)))
                .isInstanceOf(IllegalArgumentException.class);
    }
}
