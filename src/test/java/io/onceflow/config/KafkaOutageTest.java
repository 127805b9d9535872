package io.onceflow.config;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/**
 * The Kafka transaction timeout the sinks use when none is set (the brokers' maximum), how long an
 * outage the output of a completed checkpoint survives with it, and the start check's floor and its
 * opt-in.
 */
class KafkaOutageTest {
    private static final Optional<Duration> NOT_READ = Optional.empty();

    private static OnceflowConfig config(String... keysAndValues) {
        Map<String, String> settings = ValidSettings.required();
        for (int i = 0; i < keysAndValues.length; i += 2) {
            settings.put(keysAndValues[i], keysAndValues[i + 1]);
        }
        return OnceflowConfig.fromMap(settings, Map.of());
    }

    @Test
    void withoutASettingTheBrokersMaximumIsTheTimeoutAndWithoutThatTheStatedOne() {
        OnceflowConfig config = config();

        assertThat(config.kafkaTransactionTimeoutSetting()).isEmpty();
        assertThat(config.kafkaTransactionTimeout(Optional.of(Duration.ofHours(1)))).isEqualTo(Duration.ofHours(1));
        assertThat(config.kafkaTransactionTimeout(NOT_READ)).as("kafka.transaction.timeout.broker.max's default")
                .isEqualTo(Duration.ofMinutes(15));
        assertThat(config("kafka.transaction.timeout.broker.max", "20min").kafkaTransactionTimeout(NOT_READ))
                .isEqualTo(Duration.ofMinutes(20));
        assertThat(config.kafkaTransactionTimeout()).isEqualTo(Duration.ofMinutes(15));
    }

    @Test
    void aSetTimeoutWinsOverTheBrokersMaximum() {
        OnceflowConfig config = config("kafka.transaction.timeout", "14min");

        assertThat(config.kafkaTransactionTimeoutSetting()).contains(Duration.ofMinutes(14));
        assertThat(config.kafkaTransactionTimeout(Optional.of(Duration.ofHours(1)))).isEqualTo(Duration.ofMinutes(14));
    }

    @Test
    void theOutageSurvivedIsTheTimeoutLessTheLongestCheckpointCycle() {
        // (0 + 1) x max(10s, 2min + 0ms) + 2min = 4min: the same cycle the configuration check adds restart.budget to
        OnceflowConfig defaults = config();

        assertThat(defaults.kafkaOutageSurvived(NOT_READ)).isEqualTo(Duration.ofMinutes(11));
        assertThat(defaults.kafkaOutageSurvived(Optional.of(Duration.ofHours(1)))).isEqualTo(Duration.ofMinutes(56));
        assertThat(defaults.kafkaOutageSurvivedLine(Optional.of(Duration.ofHours(1)))).isEqualTo(
                "Kafka output of a completed checkpoint survives an outage of up to 56min (kafka.transaction.timeout"
                        + " 1h (not set: the brokers' transaction.max.timeout.ms) minus the longest checkpoint cycle"
                        + " (0 + 1) x max(10s, 2min + 0ms) + 2min = 4min): after a longer one the brokers abort its"
                        + " transactions and the output is lost");
        assertThat(defaults.kafkaOutageSurvivedLine(NOT_READ)).contains("up to 11min (kafka.transaction.timeout 15min"
                + " (not set, and the brokers' transaction.max.timeout.ms could not be read:"
                + " kafka.transaction.timeout.broker.max)");

        // each tolerated failure and the minimum pause lengthen the cycle
        OnceflowConfig longer = config("checkpoint.tolerable.failures", "1", "checkpoint.min.pause", "30s",
                "kafka.transaction.timeout.broker.max", "1h");
        assertThat(longer.kafkaOutageSurvived(NOT_READ)).isEqualTo(Duration.ofMinutes(53));
        assertThat(longer.kafkaOutageSurvivedLine(NOT_READ)).contains("(1 + 1) x max(10s, 2min + 30s) + 2min = 7min");
        assertThat(longer.kafkaTransactionTimeoutProblems(NOT_READ)).isEmpty();
    }

    @Test
    void theDefaultsPassTheFloor() {
        assertThat(config().kafkaTransactionTimeoutProblems(Optional.of(Duration.ofMinutes(15)))).isEmpty();
        assertThat(config().kafkaTransactionTimeoutProblems(NOT_READ)).isEmpty();
    }

    @Test
    void anOutageSurvivedShorterThanTenMinutesIsRefusedNamingTheFigureAndTheFix() {
        // the brokers allow 13min: 13min - 4min = 9min survived, above restart.budget (7min) but below the floor
        OnceflowConfig config = config();

        assertThat(config.kafkaTransactionTimeoutProblems(Optional.of(Duration.ofMinutes(13)))).containsExactly(
                "kafka.transaction.timeout: Kafka output of a completed checkpoint would survive an outage of only"
                        + " 9min (kafka.transaction.timeout 13min (not set: the brokers' transaction.max.timeout.ms)"
                        + " minus the longest checkpoint cycle (0 + 1) x max(10s, 2min + 0ms) + 2min = 4min), less"
                        + " than the 10min the start check requires: after a longer outage (a JobManager failover, a"
                        + " node replacement) the brokers abort its transactions and the output is lost. Raise the"
                        + " brokers' transaction.max.timeout.ms (and kafka.transaction.timeout with it, or leave that"
                        + " unset to use the brokers' maximum), or lower the checkpoint settings; or, to accept that"
                        + " loss, set kafka.transaction.timeout.accept.loss.after.short.outage=true.");
        assertThat(config.kafkaTransactionTimeoutProblems(Optional.of(Duration.ofMinutes(14)))).as("exactly 10min")
                .isEmpty();
        // a set timeout is held to the same floor
        assertThat(config("kafka.transaction.timeout", "13min").kafkaTransactionTimeoutProblems(
                Optional.of(Duration.ofHours(1)))).singleElement().asString()
                .startsWith("kafka.transaction.timeout: Kafka output of a completed checkpoint would survive an"
                        + " outage of only 9min (kafka.transaction.timeout 13min minus");
    }

    @Test
    void theOptInAcceptsAShortOutage() {
        OnceflowConfig config = config("kafka.transaction.timeout.accept.loss.after.short.outage", "true");

        assertThat(config.acceptsLossAfterShortOutage()).isTrue();
        assertThat(config.kafkaTransactionTimeoutProblems(Optional.of(Duration.ofMinutes(13)))).isEmpty();
        assertThat(config().acceptsLossAfterShortOutage()).isFalse();
        assertThat(ConfigProblems.of(Map.of("kafka.transaction.timeout.accept.loss.after.short.outage", "yes")))
                .anySatisfy(problem -> assertThat(problem)
                        .startsWith("kafka.transaction.timeout.accept.loss.after.short.outage: "));
    }

    @Test
    void theOptInDoesNotAcceptATimeoutThatARestartOutlives() {
        // the brokers' maximum, when it decides the timeout, is held to the configuration's own check
        OnceflowConfig config = config("kafka.transaction.timeout.accept.loss.after.short.outage", "true");

        assertThat(config.kafkaTransactionTimeoutProblems(Optional.of(Duration.ofMinutes(11)))).singleElement()
                .asString().startsWith("kafka.transaction.timeout: kafka.transaction.timeout 11min (not set: the"
                        + " brokers' transaction.max.timeout.ms) is not longer than the longest a checkpoint's"
                        + " transaction can stay open, (checkpoint.tolerable.failures + 1) x max(checkpoint.interval,"
                        + " checkpoint.timeout + checkpoint.min.pause) + checkpoint.timeout + restart.budget ="
                        + " (0 + 1) x max(10s, 2min + 0ms) + 2min + 7min = 11min");
    }
}
