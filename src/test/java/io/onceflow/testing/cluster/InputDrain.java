package io.onceflow.testing.cluster;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.testing.Eventually;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * Waits until a job has read all of its input: its consumer group's committed offsets (which the job
 * commits when a checkpoint completes, with its transactions) reach the input's end offsets as they
 * were when the wait began. A drain that moves is a slow machine; one that does not move for
 * {@code longestStall} is a stuck job, and fails the test.
 */
public final class InputDrain {
    private final Admin admin;
    private final String groupId;
    private final Map<TopicPartition, Long> end;
    private final Duration longestStall;
    private long nextReport = System.nanoTime() + Duration.ofMinutes(1).toNanos();
    private long committedBefore = -1;
    private long lastProgress = System.nanoTime();
    private Map<TopicPartition, OffsetAndMetadata> committed = Map.of();

    private InputDrain(Admin admin, String groupId, Map<TopicPartition, Long> end, Duration longestStall) {
        this.admin = admin;
        this.groupId = groupId;
        this.end = end;
        this.longestStall = longestStall;
    }

    public static void await(KafkaBrokerProcess kafka, String inputTopic, String groupId, Duration longestStall,
            Duration limit) throws Exception {
        try (Admin admin = kafka.admin()) {
            Map<TopicPartition, OffsetSpec> latest = admin.describeTopics(List.of(inputTopic)).allTopicNames().get()
                    .get(inputTopic).partitions().stream()
                    .collect(Collectors.toMap(p -> new TopicPartition(inputTopic, p.partition()), p -> OffsetSpec.latest()));
            Map<TopicPartition, Long> end = new TreeMap<>((a, b) -> Integer.compare(a.partition(), b.partition()));
            admin.listOffsets(latest).all().get().forEach((tp, info) -> end.put(tp, info.offset()));
            InputDrain drain = new InputDrain(admin, groupId, end, longestStall);
            boolean drained = Eventually.holdsWithin(limit, Duration.ofMillis(500), drain::caughtUp);
            assertThat(drained).as("drained within " + limit + "; end " + end + ", committed " + drain.committed)
                    .isTrue();
        }
    }

    /** Whether the committed offsets reached the end; fails when they have not moved for {@code longestStall}. */
    private boolean caughtUp() throws Exception {
        committed = admin.listConsumerGroupOffsets(groupId).partitionsToOffsetAndMetadata().get();
        boolean caughtUp = end.entrySet().stream().allMatch(e -> committed.get(e.getKey()) != null
                && committed.get(e.getKey()).offset() >= e.getValue());
        if (caughtUp) {
            return true;
        }
        long committedNow = committed.values().stream().mapToLong(OffsetAndMetadata::offset).sum();
        if (committedNow > committedBefore) {
            committedBefore = committedNow;
            lastProgress = System.nanoTime();
        }
        assertThat(Duration.ofNanos(System.nanoTime() - lastProgress)).as("time without committed input"
                + " while draining; end " + end + ", committed " + committed).isLessThan(longestStall);
        if (System.nanoTime() > nextReport) {
            System.out.printf("        draining: committed %d of %d input records%n", committedNow,
                    end.values().stream().mapToLong(Long::longValue).sum());
            nextReport += Duration.ofMinutes(1).toNanos();
        }
        return false;
    }
}
