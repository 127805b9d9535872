package io.onceflow.tools.audit;

import static java.nio.charset.StandardCharsets.UTF_8;

import io.onceflow.config.PostgresSettings;
import io.onceflow.ingest.DeadLetterReason;
import io.onceflow.ingest.IngestDeserializer;
import io.onceflow.ingest.IngestResult;
import io.onceflow.sink.kafka.OnceflowHeaders;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.Header;

/**
 * Reconciles a deployment of onceflow per message id: what it read (the input topics, judged
 * exactly as the job judges them) against what it wrote (the output and dead-letter topics as a
 * {@code read_committed} consumer sees them, and the PostgreSQL tables). Every accepted id must have
 * exactly one outcome: one output record (and, with PostgreSQL, one row, or one row in the rejects
 * table), or one dead letter of the processor ({@code REJECTED_BY_PROCESSOR}, {@code
 * PROCESSOR_FAILED}); every poison record must have one dead letter with the reason the job gives
 * it. An id with no outcome is lost, an id with two is duplicated: both are findings.
 *
 * <p>Dead letters are matched to input records by their source coordinates (topic, partition,
 * offset headers), never by their key, so a processor's dead letter is attributed to the id of the
 * record it came from. An output record whose id is not an input id is derived by the processor
 * (e.g. {@code id + ":refund"}): it is accounted for when its source coordinates name an accepted
 * input record, and that id's outcome is then "output"; any other is unexpected.
 *
 * <p>Totals alone would hide a lost id and a duplicated id that cancel out, so the audit keeps a
 * count per id. Memory: every unique id (a second set of them with PostgreSQL, the ids that must
 * have a row), plus the dead letters' coordinates.
 */
public final class Audit {
    private final CommittedTopicReader reader;
    private final List<String> inputTopics;
    private final String outputTopic;
    private final String deadLetterTopic;
    private final IngestDeserializer classifier;
    private final Optional<PostgresTableAudit> postgres;

    /**
     * @param clientProperties bootstrap.servers plus any security settings
     * @param classifier the job's own deserializer (same id source and limits), so the audit judges
     *     each input record the way the job must have
     * @param postgres the job's PostgreSQL sink settings, if it has one
     */
    public Audit(Properties clientProperties, List<String> inputTopics, String outputTopic, String deadLetterTopic,
            IngestDeserializer classifier, Optional<PostgresSettings> postgres) {
        this.reader = new CommittedTopicReader(clientProperties);
        this.inputTopics = List.copyOf(inputTopics);
        this.outputTopic = outputTopic;
        this.deadLetterTopic = deadLetterTopic;
        this.classifier = classifier;
        this.postgres = postgres.map(PostgresTableAudit::new);
    }

    /** Reads everything committed now on the three kinds of topic and compares per id. */
    public AuditReport run(Duration readTimeout) {
        AuditReport report = new AuditReport();
        // read first, so that each input record is matched with its dead letters as it is judged
        Map<String, List<String>> deadLetterReasons = readDeadLetters(readTimeout, report);
        IdOutcomes ids = new IdOutcomes();
        for (String topic : inputTopics) {
            reader.read(topic, readTimeout, record -> judgeInput(record, deadLetterReasons.remove(coordinates(record)),
                    ids, report));
        }
        report.uniqueIds = ids.size();
        deadLetterReasons.forEach((source, reasons) -> reasons.forEach(reason ->
                report.unexpectedDeadLetters.add(source + " " + reason)));

        Map<String, DerivedOutput> derived = readOutput(readTimeout, ids, report);
        Set<String> derivedIds = attributeDerived(derived, readTimeout, ids, report);
        ids.classify(report);
        postgres.ifPresent(table -> table.audit(ids.rowExpected(derivedIds), ids.deadLettered(), report));
        return report;
    }

    /** The reasons of the dead letters per source record's coordinates. */
    private Map<String, List<String>> readDeadLetters(Duration readTimeout, AuditReport report) {
        Map<String, List<String>> reasons = new HashMap<>();
        reader.read(deadLetterTopic, readTimeout, record -> {
            report.deadLetterRecords++;
            String reason = String.valueOf(header(record, OnceflowHeaders.DEAD_LETTER_REASON));
            report.deadLettersByReason.merge(reason, 1L, Long::sum);
            reasons.computeIfAbsent(sourceCoordinates(record), source -> new ArrayList<>(1)).add(reason);
        });
        return reasons;
    }

    /** @param deadLetters the reasons of the dead letters written for this record, or null if none */
    private void judgeInput(ConsumerRecord<byte[], byte[]> record, List<String> deadLetters, IdOutcomes ids,
            AuditReport report) {
        report.inputRecords++;
        String source = coordinates(record);
        IngestResult result = classify(record);
        List<String> reasons = deadLetters == null ? List.of() : deadLetters;
        if (result.isAccepted()) {
            report.acceptedRecords++;
            String id = result.event.messageId;
            ids.accepted(id);
            for (String reason : reasons) {
                if (fromProcessor(reason)) {
                    ids.processorDeadLetter(id, reason);
                } else {
                    report.wrongReasonDeadLetters.add(source + " " + reason + " (the job accepts the record)");
                }
            }
            return;
        }
        String expected = result.deadLetter.reason;
        report.expectedDeadLettersByReason.merge(expected, 1L, Long::sum);
        if (reasons.isEmpty()) {
            report.missingDeadLetters.add(source);
        } else if (reasons.size() > 1) {
            report.duplicatedDeadLetters.add(source + " x" + reasons.size());
        }
        reasons.stream().filter(reason -> !reason.equals(expected)).forEach(reason ->
                report.wrongReasonDeadLetters.add(source + " " + reason + " (expected " + expected + ")"));
    }

    /** Output records by key; those whose key is no input id are returned, to be attributed. */
    private Map<String, DerivedOutput> readOutput(Duration readTimeout, IdOutcomes ids, AuditReport report) {
        Map<String, DerivedOutput> derived = new HashMap<>();
        reader.read(outputTopic, readTimeout, record -> {
            report.outputRecords++;
            String id = record.key() == null ? "<null key>" : new String(record.key(), UTF_8);
            if (!ids.output(id)) {
                derived.computeIfAbsent(id, key -> new DerivedOutput(sourceCoordinates(record))).records++;
            }
        });
        return derived;
    }

    /**
     * Finds the input id each derived output came from by reading again the input records its
     * coordinates name: a second pass, made only when the processor emitted ids of its own.
     *
     * @return the derived ids accounted for
     */
    private Set<String> attributeDerived(Map<String, DerivedOutput> derived, Duration readTimeout, IdOutcomes ids,
            AuditReport report) {
        Set<String> sources = new HashSet<>();
        derived.values().forEach(output -> sources.add(output.source));
        Map<String, String> idAtSource = new HashMap<>();
        for (String topic : inputTopics) {
            if (sources.stream().anyMatch(source -> source.startsWith(topic + "/"))) {
                reader.read(topic, readTimeout, record -> {
                    String source = coordinates(record);
                    if (sources.contains(source)) {
                        IngestResult result = classify(record);
                        if (result.isAccepted()) {
                            idAtSource.put(source, result.event.messageId);
                        }
                    }
                });
            }
        }
        Set<String> accounted = new HashSet<>();
        derived.forEach((id, output) -> {
            String sourceId = idAtSource.get(output.source);
            if (sourceId == null) {
                report.unexpectedIds.add(id);
                return;
            }
            accounted.add(id);
            ids.derivedOutput(sourceId);
            report.derivedIds.add(id + " (from " + sourceId + ")");
            if (output.records > 1) {
                report.duplicatedIds.add(id + " x" + output.records);
            }
        });
        return accounted;
    }

    private IngestResult classify(ConsumerRecord<byte[], byte[]> record) {
        OneResult classified = new OneResult();
        try {
            classifier.deserialize(record, classified);
        } catch (Exception e) {
            throw new IllegalStateException("the deserializer threw on " + coordinates(record), e);
        }
        return classified.result;
    }

    private static boolean fromProcessor(String reason) {
        return Arrays.stream(DeadLetterReason.values()).anyMatch(known -> known.fromProcessor() && known.name().equals(reason));
    }

    private static String coordinates(ConsumerRecord<?, ?> record) {
        return record.topic() + "/" + record.partition() + "/" + record.offset();
    }

    /** The coordinates of the input record an output or dead-letter record names in its headers. */
    private static String sourceCoordinates(ConsumerRecord<?, ?> record) {
        return header(record, OnceflowHeaders.SOURCE_TOPIC) + "/" + header(record, OnceflowHeaders.SOURCE_PARTITION)
                + "/" + header(record, OnceflowHeaders.SOURCE_OFFSET);
    }

    private static String header(ConsumerRecord<?, ?> record, String name) {
        Header header = record.headers().lastHeader(name);
        return header == null ? null : new String(header.value(), UTF_8);
    }

    /** Output records of one id that is no input id, and the input record the first one names. */
    private static final class DerivedOutput {
        final String source;
        int records;

        DerivedOutput(String source) {
            this.source = source;
        }
    }

    /** The deserializer emits exactly one result per record; this holds it. */
    private static final class OneResult implements Collector<IngestResult> {
        IngestResult result;

        @Override
        public void collect(IngestResult record) {
            result = record;
        }

        @Override
        public void close() {}
    }
}
