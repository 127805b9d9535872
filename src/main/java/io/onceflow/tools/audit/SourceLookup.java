package io.onceflow.tools.audit;

import io.onceflow.ingest.IngestResult;
import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.Map;
import java.util.NavigableSet;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.Function;
import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * The input records that output records name as their source, read again by their coordinates:
 * which id each one had (to attribute an id the processor derived) and when it was written (to tell
 * a redelivery after the dedup TTL from a duplicate). Only done for the few output records that need
 * it, and by seeking, not by reading the topics again.
 */
final class SourceLookup {
    /**
     * An input record as the audit needs it again.
     *
     * @param id its message id, null if the job does not accept it
     * @param recordTime its Kafka timestamp
     */
    record Source(String id, long recordTime) {}

    private SourceLookup() {}

    /**
     * @param coordinates {@code topic/partition/offset} of each record wanted; others (no valid
     *     coordinates, not in an input topic, no such record) are simply not in the result
     * @param classify the job's judgement of a record
     */
    static Map<String, Source> lookUp(CommittedTopicReader reader, Collection<String> inputTopics,
            Set<String> coordinates, Function<ConsumerRecord<byte[], byte[]>, IngestResult> classify, Duration timeout) {
        Map<String, Map<Integer, NavigableSet<Long>>> wanted = new TreeMap<>();
        for (String source : coordinates) {
            RecordCoordinates.parse(source).filter(at -> inputTopics.contains(at.topic())).ifPresent(at ->
                    wanted.computeIfAbsent(at.topic(), topic -> new TreeMap<>())
                            .computeIfAbsent(at.partition(), partition -> new TreeSet<>()).add(at.offset()));
        }
        Map<String, Source> found = new HashMap<>();
        wanted.forEach((topic, offsets) -> reader.readAt(topic, offsets, timeout, record -> {
            IngestResult result = classify.apply(record);
            found.put(Audit.coordinates(record),
                    new Source(result.isAccepted() ? result.event.messageId : null, record.timestamp()));
        }));
        return found;
    }
}
