package io.onceflow.tools.audit;

import static java.nio.charset.StandardCharsets.UTF_8;

import io.onceflow.config.PostgresSettings;
import io.onceflow.ingest.IngestDeserializer;
import io.onceflow.ingest.IngestResult;
import io.onceflow.sink.kafka.OnceflowHeaders;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.Header;

/**
 * Counts, per message id, what a deployment of onceflow read and what it wrote: the input topics
 * (classified exactly as the job classifies them), the output topic and the dead-letter topic, both
 * as a {@code read_committed} consumer sees them, and the PostgreSQL table. Every accepted id must
 * appear once in the output and once in the table, every poison record once in the dead-letter
 * topic with the same reason.
 *
 * <p>Totals alone would hide a lost id and a duplicated id that cancel out, so the audit keeps a
 * count per id. Memory: about 100 bytes per unique id.
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
        Map<String, int[]> idCounts = new HashMap<>();
        Map<String, String> expectedDeadLetters = new HashMap<>();
        OneResult classified = new OneResult();
        for (String topic : inputTopics) {
            reader.read(topic, readTimeout, record -> {
                report.inputRecords++;
                classified.result = null;
                try {
                    classifier.deserialize(record, classified);
                } catch (Exception e) {
                    throw new IllegalStateException("the deserializer threw on " + coordinates(record), e);
                }
                if (classified.result.isAccepted()) {
                    report.acceptedRecords++;
                    idCounts.computeIfAbsent(classified.result.event.messageId, id -> new int[2])[0]++;
                } else {
                    expectedDeadLetters.put(coordinates(record), classified.result.deadLetter.reason);
                    report.expectedDeadLettersByReason.merge(classified.result.deadLetter.reason, 1L, Long::sum);
                }
            });
        }
        report.uniqueIds = idCounts.size();

        reader.read(outputTopic, readTimeout, record -> {
            report.outputRecords++;
            String id = record.key() == null ? "<null key>" : new String(record.key(), UTF_8);
            int[] counts = idCounts.get(id);
            if (counts == null) {
                report.unexpectedIds.add(id);
            } else {
                counts[1]++;
            }
        });
        idCounts.forEach((id, counts) -> {
            if (counts[1] == 0) {
                report.missingIds.add(id);
            } else if (counts[1] > 1) {
                report.duplicatedIds.add(id + " x" + counts[1]);
            }
        });

        Map<String, Integer> deadLetterCounts = new HashMap<>();
        reader.read(deadLetterTopic, readTimeout, record -> {
            report.deadLetterRecords++;
            String reason = header(record, OnceflowHeaders.DEAD_LETTER_REASON);
            report.deadLettersByReason.merge(String.valueOf(reason), 1L, Long::sum);
            String source = header(record, OnceflowHeaders.SOURCE_TOPIC) + "/"
                    + header(record, OnceflowHeaders.SOURCE_PARTITION) + "/" + header(record, OnceflowHeaders.SOURCE_OFFSET);
            String expectedReason = expectedDeadLetters.get(source);
            if (expectedReason == null) {
                report.unexpectedDeadLetters.add(source);
            } else if (!expectedReason.equals(reason)) {
                report.wrongReasonDeadLetters.add(source + " " + reason + " (expected " + expectedReason + ")");
            }
            deadLetterCounts.merge(source, 1, Integer::sum);
        });
        expectedDeadLetters.keySet().forEach(source -> {
            int count = deadLetterCounts.getOrDefault(source, 0);
            if (count == 0) {
                report.missingDeadLetters.add(source);
            } else if (count > 1) {
                report.duplicatedDeadLetters.add(source + " x" + count);
            }
        });
        postgres.ifPresent(table -> table.audit(idCounts.keySet(), report));
        return report;
    }

    private static String coordinates(ConsumerRecord<?, ?> record) {
        return record.topic() + "/" + record.partition() + "/" + record.offset();
    }

    private static String header(ConsumerRecord<?, ?> record, String name) {
        Header header = record.headers().lastHeader(name);
        return header == null ? null : new String(header.value(), UTF_8);
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
