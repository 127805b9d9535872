package io.onceflow.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;

class ValueParsersTest {
    static Stream<Arguments> durations() {
        return Stream.of(
                Arguments.of("500ms", Duration.ofMillis(500)),
                Arguments.of("30s", Duration.ofSeconds(30)),
                Arguments.of("10min", Duration.ofMinutes(10)),
                Arguments.of("10m", Duration.ofMinutes(10)),
                Arguments.of("2h", Duration.ofHours(2)),
                Arguments.of("7d", Duration.ofDays(7)),
                Arguments.of("0ms", Duration.ZERO),
                Arguments.of("PT10M", Duration.ofMinutes(10)),
                Arguments.of("pt1.5s", Duration.ofMillis(1500)),
                Arguments.of("P1DT2H", Duration.ofHours(26)),
                Arguments.of("-PT1S", Duration.ofSeconds(-1)));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("durations")
    void parsesDurations(String text, Duration expected) {
        assertThat(ValueParsers.duration(text)).isEqualTo(expected);
    }

    @ParameterizedTest
    @ValueSource(
            strings = {"10", "s", "1.5h", "10 s", "10S", "10sec", "-5s", "1w", "P", "PTX", "7d2h",
                "99999999999999999999d", "9999999999999999d"})
    void rejectsWhatIsNotADuration(String text) {
        assertThatThrownBy(() -> ValueParsers.duration(text))
                .isInstanceOf(InvalidValueException.class)
                .hasMessage("'" + text + "' is not a duration");
    }

    @Test
    void durationAtLeastEnforcesTheMinimum() {
        var atLeastTenMillis = ValueParsers.durationAtLeast(Duration.ofMillis(10));

        assertThat(atLeastTenMillis.apply("10ms")).isEqualTo(Duration.ofMillis(10));
        assertThatThrownBy(() -> atLeastTenMillis.apply("PT0.009S"))
                .isInstanceOf(InvalidValueException.class)
                .hasMessage("'PT0.009S' is less than 10ms");
    }

    static Stream<Arguments> formattedDurations() {
        return Stream.of(
                Arguments.of(Duration.ZERO, "0ms"),
                Arguments.of(Duration.ofMillis(1500), "1500ms"),
                Arguments.of(Duration.ofSeconds(90), "90s"),
                Arguments.of(Duration.ofMinutes(15), "15min"),
                Arguments.of(Duration.ofMinutes(120), "2h"),
                Arguments.of(Duration.ofDays(7), "7d"),
                Arguments.of(Duration.ofNanos(1500), "PT0.0000015S"));
    }

    @ParameterizedTest(name = "{1}")
    @MethodSource("formattedDurations")
    void formatsDurationsInTheLargestExactUnit(Duration duration, String expected) {
        assertThat(ValueParsers.format(duration)).isEqualTo(expected);
        if (!expected.startsWith("PT")) {
            assertThat(ValueParsers.duration(expected)).isEqualTo(duration);
        }
    }

    @ParameterizedTest
    @ValueSource(
            strings = {"events", "onceflow_events", "_private", "billing.events", "E1",
                "a23456789012345678901234567890123456789012345678901234567890123"})
    void acceptsSqlTableNames(String name) {
        assertThat(ValueParsers.sqlTableName(name)).isEqualTo(name);
    }

    @ParameterizedTest
    @ValueSource(
            strings = {
                "events; drop table x",
                "events;drop table x",
                "events\"; DROP TABLE x; --",
                "events'--",
                "events/**/",
                "\"Events\"",
                "a.b.c",
                ".events",
                "events.",
                "1events",
                "év",
                "events x",
                "a234567890123456789012345678901234567890123456789012345678901234"
            })
    void rejectsAnythingButPlainIdentifiersAsTableNames(String name) {
        assertThatThrownBy(() -> ValueParsers.sqlTableName(name))
                .isInstanceOf(InvalidValueException.class)
                .hasMessage("'" + name + "' is not a valid table name");
    }

    @ParameterizedTest
    @ValueSource(strings = {"payments", "a.b_c-D9", "__consumer_offsets"})
    void acceptsTopicNames(String topic) {
        assertThat(ValueParsers.topicName(topic)).isEqualTo(topic);
    }

    @ParameterizedTest
    @ValueSource(strings = {".", "..", "a b", "a/b", "ä", "a:b"})
    void rejectsInvalidTopicNames(String topic) {
        assertThatThrownBy(() -> ValueParsers.topicName(topic))
                .isInstanceOf(InvalidValueException.class);
    }

    @Test
    void topicNamesMayHaveUpTo249Characters() {
        assertThat(ValueParsers.topicName("t".repeat(249))).hasSize(249);
        assertThatThrownBy(() -> ValueParsers.topicName("t".repeat(250)))
                .isInstanceOf(InvalidValueException.class);
    }

    @Test
    void topicListIsSplitAtCommasAndTrimmed() {
        assertThat(ValueParsers.topicList("a, b ,c")).isEqualTo(List.of("a", "b", "c"));
    }

    @ParameterizedTest
    @ValueSource(
            strings = {"localhost:9092", "kafka-1.internal:9092,kafka-2.internal:9093",
                "10.0.0.1:65535", "[::1]:9092", "kafka_1:1"})
    void acceptsHostAndPortLists(String servers) {
        assertThat(ValueParsers.hostAndPortList(servers)).isEqualTo(servers);
    }

    @ParameterizedTest
    @ValueSource(
            strings = {"localhost", "localhost:", ":9092", "localhost:65536", "localhost:0",
                "host:port", "PLAINTEXT://kafka:9092", "a:1;b:2", "kafka:9092,"})
    void rejectsInvalidHostAndPortLists(String servers) {
        assertThatThrownBy(() -> ValueParsers.hostAndPortList(servers))
                .isInstanceOf(InvalidValueException.class);
    }

    @ParameterizedTest
    @ValueSource(
            strings = {"key", "header:message-id", "header:X-Id", "json:/id", "json:/payment/id",
                "json:/a~0b/c~1d", "json:/items/0", "json:/"})
    void acceptsMessageIdSources(String source) {
        assertThat(ValueParsers.messageIdSource(source)).isEqualTo(source);
    }

    @ParameterizedTest
    @ValueSource(
            strings = {"", "keys", "header:", "header: ", "json:", "json:id", "json:/a~", "json:/a~2",
                "jsonpath:$.id", "Key"})
    void rejectsInvalidMessageIdSources(String source) {
        assertThatThrownBy(() -> ValueParsers.messageIdSource(source))
                .isInstanceOf(InvalidValueException.class);
    }

    @ParameterizedTest
    @ValueSource(
            strings = {"file:///var/onceflow/checkpoints", "s3://bucket/onceflow",
                "hdfs://namenode:8020/flink/checkpoints", "file:/tmp/checkpoints"})
    void acceptsCheckpointUris(String uri) {
        assertThat(ValueParsers.checkpointUri(uri)).isEqualTo(uri);
    }

    @ParameterizedTest
    @ValueSource(
            strings = {"/var/checkpoints", "checkpoints", "s3://bucket", "s3://bucket/", "file:///",
                "file:relative", "s3://bucket/a b"})
    void rejectsCheckpointUrisFlinkWouldRefuse(String uri) {
        assertThatThrownBy(() -> ValueParsers.checkpointUri(uri))
                .isInstanceOf(InvalidValueException.class);
    }

    @Test
    void integerBetweenAcceptsTheBoundsOnly() {
        var oneToTen = ValueParsers.integerBetween(1, 10);

        assertThat(oneToTen.apply("1")).isEqualTo(1);
        assertThat(oneToTen.apply("10")).isEqualTo(10);
        for (String invalid : List.of("0", "11", "-1", "ten", "1.0", "99999999999")) {
            assertThatThrownBy(() -> oneToTen.apply(invalid))
                    .isInstanceOf(InvalidValueException.class)
                    .hasMessage("'" + invalid + "' is not a whole number from 1 to 10");
        }
    }
}
