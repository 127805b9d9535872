package io.onceflow.tools.audit;

import static io.onceflow.config.ConfigException.problem;

import io.onceflow.cli.CannotRunException;
import io.onceflow.cli.ShellWords;
import java.time.Duration;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.GroupAuthorizationException;

/**
 * Which input records an {@link Audit} answers for. A stopped or drained job's audit covers the
 * whole input topics. A live audit covers each input partition up to the offset the job's consumer
 * group committed when its last checkpoint completed (the job commits its offsets there on every
 * completed checkpoint): everything before that bound has had its effects committed with that
 * checkpoint, everything after it may still be in flight.
 *
 * <p>The bound decides which ids are audited (those with an accepted record before it) and which
 * poison records must have their dead letter. What the job wrote for an audited id counts wherever
 * its source is, since the cut is per source subtask and an id's first record may lie just beyond it
 * in another partition; what it wrote for no audited id counts only when its source is before the
 * bound, and is in flight otherwise.
 */
public final class AuditScope {
    private static final AuditScope WHOLE_TOPICS = new AuditScope(null, Map.of(), Set.of());

    /** The consumer group the bound was read from; null for the whole topics. */
    private final String group;
    /** The first offset beyond the bound, per input partition, in topic and partition order. */
    private final Map<TopicPartition, Long> bound;
    /** The input partitions without a committed offset: a live audit covers nothing of them. */
    private final Set<TopicPartition> uncommitted;

    private AuditScope(String group, Map<TopicPartition, Long> bound, Set<TopicPartition> uncommitted) {
        this.group = group;
        this.bound = bound;
        this.uncommitted = uncommitted;
    }

    /** The whole input topics, for a stopped or drained job. */
    public static AuditScope wholeTopics() {
        return WHOLE_TOPICS;
    }

    /**
     * The input up to the offsets {@code group} committed, for a running job.
     *
     * @param committed the group's committed offset per input partition that has one
     * @param partitions every partition of the input topics
     */
    static AuditScope upToCommittedOffsets(String group, Map<TopicPartition, Long> committed,
            Set<TopicPartition> partitions) {
        Map<TopicPartition, Long> bound = new TreeMap<>(AuditScope::compare);
        partitions.forEach(partition -> bound.put(partition, committed.getOrDefault(partition, 0L)));
        Set<TopicPartition> uncommitted = partitions.stream().filter(partition -> !committed.containsKey(partition))
                .collect(Collectors.toUnmodifiableSet());
        return new AuditScope(group, Collections.unmodifiableMap(bound), uncommitted);
    }

    /**
     * Reads the offsets the job's consumer group committed for its input topics: the position of
     * its last completed checkpoint.
     *
     * @param clientProperties bootstrap.servers plus any security settings
     * @throws CannotRunException if the group has none, or the principal may not describe it
     */
    public static AuditScope ofRunningJob(Properties clientProperties, String group, List<String> inputTopics,
            Duration timeout) {
        String brokers = String.valueOf(clientProperties.get("bootstrap.servers"));
        try (Admin admin = Admin.create(clientProperties)) {
            Set<TopicPartition> partitions = new HashSet<>();
            for (TopicDescription topic : admin.describeTopics(inputTopics).allTopicNames()
                    .get(timeout.toMillis(), TimeUnit.MILLISECONDS).values()) {
                topic.partitions().forEach(info -> partitions.add(new TopicPartition(topic.name(), info.partition())));
            }
            Map<TopicPartition, Long> committed = new TreeMap<>(AuditScope::compare);
            for (Map.Entry<TopicPartition, OffsetAndMetadata> offset : admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata().get(timeout.toMillis(), TimeUnit.MILLISECONDS).entrySet()) {
                if (offset.getValue() != null && partitions.contains(offset.getKey())) {
                    committed.put(offset.getKey(), offset.getValue().offset());
                }
            }
            if (committed.isEmpty()) {
                throw new CannotRunException(List.of(problem("input.group.id", "the consumer group '" + group
                                + "' has no committed offsets for the input topics " + inputTopics + " at " + brokers
                                + ": the job has completed no checkpoint yet, or this is not its group (a live audit"
                                + " covers the input up to the offsets the job commits there at each checkpoint)",
                        "Wait for the job's first completed checkpoint, or audit a stopped job without --live.")));
            }
            return upToCommittedOffsets(group, committed, partitions);
        } catch (ExecutionException e) {
            if (e.getCause() instanceof GroupAuthorizationException) {
                throw new CannotRunException(List.of(problem("input.group.id", "the Kafka principal may not Describe"
                        + " the consumer group '" + group + "' at " + brokers + ", whose committed offsets bound a"
                        + " live audit", "Grant it: kafka-acls.sh --bootstrap-server " + ShellWords.quoted(brokers)
                        + " --command-config <admin client properties> --add --allow-principal <the audit's principal>"
                        + " --operation Describe --group " + ShellWords.quoted(group))));
            }
            throw new IllegalStateException("could not read the committed offsets of group " + group + ": "
                    + e.getCause().getMessage(), e.getCause());
        } catch (TimeoutException e) {
            throw new IllegalStateException("the Kafka brokers at " + brokers + " did not give the committed offsets"
                    + " of group " + group + " within " + timeout, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while reading the committed offsets of group " + group, e);
        }
    }

    /** Whether this is a live audit, bounded by the committed offsets. */
    public boolean live() {
        return group != null;
    }

    /**
     * Whether the record at these coordinates is before the bound: always for the whole topics, and
     * for a topic that is no input topic (a record naming it is judged, and found unexpected).
     */
    boolean covers(String topic, int partition, long offset) {
        if (!live() || topic == null) {
            return true; // a row without source columns is judged, as the whole topics are
        }
        Long end = bound.get(new TopicPartition(topic, partition));
        if (end == null) {
            return bound.keySet().stream().noneMatch(input -> input.topic().equals(topic));
        }
        return offset < end;
    }

    /**
     * As {@link #covers(String, int, long)}, for coordinates written {@code topic/partition/offset};
     * a text that writes none (a record without source headers) is covered: judged, and found unexpected.
     */
    boolean covers(String coordinates) {
        return RecordCoordinates.parse(coordinates).map(at -> covers(at.topic(), at.partition(), at.offset()))
                .orElse(true);
    }

    /** The consumer group a live audit's bound comes from; null for the whole topics. */
    String group() {
        return group;
    }

    /** The first offset beyond the bound per input partition, in topic and partition order; empty for the whole topics. */
    Map<TopicPartition, Long> bound() {
        return bound;
    }

    /** The input partitions without a committed offset, of which a live audit covers nothing. */
    Set<TopicPartition> uncommitted() {
        return uncommitted;
    }

    private static int compare(TopicPartition a, TopicPartition b) {
        int byTopic = a.topic().compareTo(b.topic());
        return byTopic != 0 ? byTopic : Integer.compare(a.partition(), b.partition());
    }
}
