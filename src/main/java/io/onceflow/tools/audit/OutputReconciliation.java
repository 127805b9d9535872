package io.onceflow.tools.audit;

import static java.nio.charset.StandardCharsets.UTF_8;

import io.onceflow.ingest.IngestResult;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.function.Function;
import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * The output topic's part of an {@link Audit}: counts each audited id's output records, attributes
 * the ids the processor derived to the input id they came from, and, for an id output more than
 * once, tells a redelivery after the dedup TTL from a duplicate by the record times of the input
 * records its outputs name as their sources and by the times the outputs were written ({@link
 * IdOutcomes#redeliveredAfter}). One per audit pass.
 */
final class OutputReconciliation {
    private final CommittedTopicReader reader;
    private final String outputTopic;
    private final List<String> inputTopics;
    private final Function<ConsumerRecord<byte[], byte[]>, IngestResult> classify;
    private final Duration dedupTtl;
    private final Duration timeout;
    /** Output records keyed by no audited id, per key: derived from one, in flight, or unexpected. */
    private final Map<String, DerivedOutput> candidates = new HashMap<>();
    /** The source coordinates of each output record of the ids output more than once. */
    private Map<String, List<String>> repeatedSources = Map.of();
    /** The timestamps (when the job wrote them) of each output record of the ids output more than once. */
    private final Map<String, List<Long>> repeatedWrittenTimes = new HashMap<>();
    /** The input records that the sources above and the candidates' first sources name. */
    private Map<String, SourceLookup.Source> sources = Map.of();

    OutputReconciliation(CommittedTopicReader reader, String outputTopic, List<String> inputTopics,
            Function<ConsumerRecord<byte[], byte[]>, IngestResult> classify, Duration dedupTtl, Duration timeout) {
        this.reader = reader;
        this.outputTopic = outputTopic;
        this.inputTopics = inputTopics;
        this.classify = classify;
        this.dedupTtl = dedupTtl;
        this.timeout = timeout;
    }

    /**
     * Reads the output topic, counting into {@code ids} and {@code report}.
     *
     * @return the input id each derived id accounted for came from
     */
    Map<String, String> reconcile(AuditScope scope, IdOutcomes ids, AuditReport report) {
        reader.read(outputTopic, timeout, record -> {
            report.outputRecords++;
            String id = record.key() == null ? "<null key>" : new String(record.key(), UTF_8);
            if (!ids.output(id)) {
                candidates.computeIfAbsent(id, key -> new DerivedOutput(Audit.sourceCoordinates(record))).records++;
            }
        });
        Set<String> repeated = new HashSet<>(ids.withRepeatedOutputs());
        candidates.forEach((id, output) -> {
            if (output.records > 1) {
                repeated.add(id);
            }
        });
        if (!repeated.isEmpty()) {
            repeatedSources = readSources(repeated);
        }
        Set<String> wanted = new HashSet<>();
        candidates.values().forEach(output -> wanted.add(output.source));
        repeatedSources.values().forEach(wanted::addAll);
        if (!wanted.isEmpty()) {
            sources = SourceLookup.lookUp(reader, inputTopics, wanted, classify, timeout);
        }
        return attributeDerived(scope, ids, report);
    }

    /** The audited ids output more than once under their own id whose outputs came from records farther apart than the TTL. */
    Set<String> ownIdsRedeliveredAfterTtl(IdOutcomes ids) {
        Set<String> apart = new HashSet<>();
        ids.withRepeatedOutputs().forEach(id -> {
            if (fromRecordsFartherApartThanTtl(id)) {
                apart.add(id);
            }
        });
        return apart;
    }

    /** The output records under derived id {@code id}. */
    int derivedRecords(String id) {
        DerivedOutput output = candidates.get(id);
        return output == null ? 0 : output.records;
    }

    /**
     * Accounts each candidate whose first source is an accepted record of an audited id as derived
     * from it; any other is unexpected when its source is one the audit covers, in flight otherwise.
     */
    private Map<String, String> attributeDerived(AuditScope scope, IdOutcomes ids, AuditReport report) {
        Map<String, String> derivedFrom = new HashMap<>();
        candidates.forEach((id, output) -> {
            SourceLookup.Source source = sources.get(output.source);
            String sourceId = source == null ? null : source.id();
            if (sourceId == null || !ids.isAudited(sourceId)) {
                if (scope.covers(output.source)) {
                    report.unexpectedIds.add(id);
                } else {
                    report.inFlightOutputRecords += output.records;
                }
                return;
            }
            derivedFrom.put(id, sourceId);
            ids.derivedOutput(sourceId);
            report.derivedIds.add(id + " (from " + sourceId + ")");
            if (output.records > 1) {
                (fromRecordsFartherApartThanTtl(id) ? report.redeliveredAfterTtl : report.duplicatedIds)
                        .add(id + " x" + output.records);
            }
        });
        return derivedFrom;
    }

    private boolean fromRecordsFartherApartThanTtl(String id) {
        List<String> outputSources = repeatedSources.getOrDefault(id, List.of());
        List<Long> recordTimes = outputSources.stream().map(sources::get).filter(Objects::nonNull)
                .map(SourceLookup.Source::recordTime).toList();
        return recordTimes.size() == outputSources.size()
                && IdOutcomes.redeliveredAfter(recordTimes, repeatedWrittenTimes.getOrDefault(id, List.of()), dedupTtl);
    }

    /** A second read of the output topic, for the few ids output more than once: each record's source. */
    private Map<String, List<String>> readSources(Set<String> repeated) {
        Map<String, List<String>> sourcesById = new HashMap<>();
        reader.read(outputTopic, timeout, record -> {
            String id = record.key() == null ? "<null key>" : new String(record.key(), UTF_8);
            if (repeated.contains(id)) {
                sourcesById.computeIfAbsent(id, key -> new ArrayList<>(2)).add(Audit.sourceCoordinates(record));
                repeatedWrittenTimes.computeIfAbsent(id, key -> new ArrayList<>(2)).add(record.timestamp());
            }
        });
        return sourcesById;
    }

    /** Output records of one id that is no audited id, and the input record the first one names. */
    private static final class DerivedOutput {
        final String source;
        int records;

        DerivedOutput(String source) {
            this.source = source;
        }
    }
}
