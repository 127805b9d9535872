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
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.Header;

/**
 * Reconciles a deployment of onceflow per message id: what it read (the input topics, judged
 * exactly as the job judges them) against what it wrote (the output and dead-letter topics as a
 * {@code read_committed} consumer sees them, and the PostgreSQL tables). Every accepted id must have
 * exactly one outcome: one output record (and, with PostgreSQL, one row, or one row in the rejects
 * table), one dead letter of the processor ({@code REJECTED_BY_PROCESSOR}, {@code
 * PROCESSOR_FAILED}), or one filter record ({@code FILTERED_BY_PROCESSOR}); every poison record
 * must have one dead letter with the reason the job gives it. An id with no outcome is lost, an id
 * with two is duplicated: both are findings, but for an id whose second output came from a record
 * farther from the first than {@code dedup.ttl} (a redelivery after the TTL, a documented limit).
 *
 * <p>Dead letters are matched to input records by their source coordinates (topic, partition,
 * offset headers), never by their key, so a processor's dead letter is attributed to the id of the
 * record it came from. An output record whose id is not an input id is derived by the processor
 * (e.g. {@code id + ":refund"}): it is accounted for when its source coordinates name an accepted
 * input record, and that id's outcome is then "output"; any other is unexpected.
 *
 * <p>A stopped or drained job is audited whole ({@link #run(Duration)}); a running one up to its
 * last completed checkpoint ({@link #runLive}, see {@link AuditScope}).
 *
 * <p>Totals alone would hide a lost id and a duplicated id that cancel out, so the audit keeps a
 * count per id. Memory: every unique id (a second set of them with PostgreSQL, the ids that must
 * have a row), plus the coordinates of the dead letters and filter records.
 */
public final class Audit {
    private final CommittedTopicReader reader;
    private final List<String> inputTopics;
    private final String outputTopic;
    private final String deadLetterTopic;
    private final IngestDeserializer classifier;
    private final Optional<PostgresTableAudit> postgres;
    private final Optional<String> resultsTopic;
    private final Duration dedupTtl;

    /** How a live audit waits before it looks again. */
    interface Pause {
        void pause(Duration duration) throws InterruptedException;
    }

    /**
     * @param clientProperties bootstrap.servers plus any security settings
     * @param classifier the job's own deserializer (same id source and limits), so the audit judges
     *     each input record the way the job must have
     * @param postgres the job's PostgreSQL sink settings, if it has one
     * @param dedupTtl the job's {@code dedup.ttl}
     */
    public Audit(Properties clientProperties, List<String> inputTopics, String outputTopic, String deadLetterTopic,
            IngestDeserializer classifier, Optional<PostgresSettings> postgres, Duration dedupTtl) {
        this.reader = new CommittedTopicReader(clientProperties);
        this.inputTopics = List.copyOf(inputTopics);
        this.outputTopic = outputTopic;
        this.deadLetterTopic = deadLetterTopic;
        this.classifier = classifier;
        this.postgres = postgres.map(PostgresTableAudit::new);
        this.resultsTopic = postgres.flatMap(PostgresSettings::effectResultsTopic);
        this.dedupTtl = dedupTtl;
    }

    /**
     * Audits a stopped or drained job: everything committed now, the whole input topics. Warns when
     * the job looks running (a transaction open on its output or dead-letter topic, prepared
     * PostgreSQL transactions): what it has in flight would look lost.
     */
    public AuditReport run(Duration readTimeout) {
        return run(readTimeout, Optional.empty());
    }

    /**
     * As {@link #run(Duration)}, and warns too when input records lie after {@code jobPosition}, the
     * offsets the job's group committed at its last completed checkpoint: a job that is running idle,
     * or stopped before it read and checkpointed all its input, has no open transaction to show it.
     */
    public AuditReport run(Duration readTimeout, Optional<AuditScope> jobPosition) {
        List<String> warnings = new ArrayList<>();
        for (String topic : List.of(outputTopic, deadLetterTopic)) {
            List<Integer> open = reader.partitionsWithOpenTransactions(topic, readTimeout);
            if (!open.isEmpty()) {
                warnings.add("a transaction is open on " + topic + " (partitions " + open + "): the job is running,"
                        + " or stopped with output not yet committed. This audit sees only what is committed now,"
                        + " and reports what is in flight as lost. To audit a running job, use --live.");
            }
        }
        AuditReport report = run(readTimeout, AuditScope.wholeTopics(), jobPosition.orElse(AuditScope.wholeTopics()));
        if (report.inputAfterJobPosition.count > 0) {
            warnings.add(report.inputAfterJobPosition.count + " input records lie after the offsets the job's"
                    + " consumer group committed at its last completed checkpoint, e.g. "
                    + report.inputAfterJobPosition.examples + ": the job is running, or stopped before it had read"
                    + " and checkpointed all its input. This audit reports what it has not done as lost. Audit a"
                    + " running job with --live, or wait until the job has drained.");
        }
        if (report.preparedTransactionsLeft.count > 0) {
            warnings.add("the job has prepared PostgreSQL transactions: it is running, or stopped before they"
                    + " committed. To audit a running job, use --live.");
        }
        report.warnings.addAll(warnings);
        return report;
    }

    /**
     * Audits a running job up to {@code scope}'s bound, the offsets of its last completed checkpoint.
     * The sinks commit that checkpoint's output in the same notification as the offsets, in no fixed
     * order (and a read_committed reader sees a partition's committed records only once every older
     * transaction on it ended): so while it finds problems, it looks again, {@code pause} later, for
     * up to {@code recheckFor}, and reports what persists.
     */
    public AuditReport runLive(Duration readTimeout, AuditScope scope, Duration recheckFor, Duration pause) {
        return runLive(readTimeout, scope, recheckFor, pause, duration -> Thread.sleep(duration.toMillis()));
    }

    AuditReport runLive(Duration readTimeout, AuditScope scope, Duration recheckFor, Duration pause, Pause pauser) {
        AuditReport report = run(readTimeout, scope);
        long firstPassDone = System.nanoTime();
        long deadline = firstPassDone + recheckFor.toNanos();
        int rechecks = 0;
        while (!report.clean() && System.nanoTime() < deadline) {
            try {
                pauser.pause(Duration.ofNanos(Math.min(pause.toNanos(), deadline - System.nanoTime())));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
            rechecks++;
            report = run(readTimeout, scope);
        }
        report.rechecks = rechecks;
        long recheckedNanos = rechecks == 0 ? 0 : System.nanoTime() - firstPassDone;
        // whole seconds, rounded up: a time for people, not a measurement
        report.recheckedFor = Duration.ofSeconds((recheckedNanos + 999_999_999L) / 1_000_000_000L);
        return report;
    }

    /** One reading of everything, for the input {@code scope} covers. */
    AuditReport run(Duration readTimeout, AuditScope scope) {
        return run(readTimeout, scope, AuditScope.wholeTopics());
    }

    /** @param jobPosition the input the job has checkpointed: the records after it are counted */
    private AuditReport run(Duration readTimeout, AuditScope scope, AuditScope jobPosition) {
        AuditReport report = new AuditReport(scope, dedupTtl);
        // read first, so that each input record is matched with its dead letters as it is judged
        Map<String, List<DeadLetterRecord>> deadLetterReasons = readDeadLetters(readTimeout, report);
        IdOutcomes ids = new IdOutcomes();
        for (String topic : inputTopics) {
            reader.read(topic, readTimeout, record -> {
                if (!jobPosition.covers(record.topic(), record.partition(), record.offset())) {
                    report.inputAfterJobPosition.add(coordinates(record));
                }
                judgeInput(record, deadLetterReasons.remove(coordinates(record)), scope, ids, report);
            });
        }
        IdOutcomes.Forgotten forgotten = ids.forgetUncovered();
        report.inFlightIds = forgotten.ids();
        report.inFlightDeadLetters += forgotten.deadLetters();
        report.uniqueIds = ids.size();
        deadLetterReasons.forEach((source, reasons) -> {
            if (scope.covers(source)) {
                reasons.forEach(dead -> report.unexpectedDeadLetters.add(source + " " + dead.reason()));
            } else {
                report.inFlightDeadLetters += reasons.size();
            }
        });

        OutputReconciliation output = new OutputReconciliation(reader, outputTopic, inputTopics, this::classify,
                dedupTtl, readTimeout);
        Map<String, String> derivedFrom = output.reconcile(scope, ids, report);
        ids.classify(report, output.ownIdsRedeliveredAfterTtl(ids), dedupTtl);
        report.resultsTopic = resultsTopic.orElse(null);
        postgres.ifPresent(table -> weighRedeliveries(table.audit(ids.rowExpected(derivedFrom.keySet()),
                ids.deadLettered(), report), derivedFrom, output, ids, report));
        resultsTopic.ifPresent(topic -> auditResultsTopic(topic, readTimeout, report));
        return report;
    }

    /**
     * The results topic against the effects the table's scan found decided. A live audit reads the
     * topic after the table, so an outcome decided since is not missing; one decided and not yet
     * published is in flight, not a problem.
     */
    private void auditResultsTopic(String topic, Duration readTimeout, AuditReport report) {
        PublishedOutcomes published = PublishedOutcomes.read(reader, topic, readTimeout);
        report.resultsPublished = published.records();
        for (String problem : published.problems(report.decidedStatuses)) {
            if (!(report.live() && problem.endsWith("was not published"))) {
                report.resultsProblems.add(problem);
            }
        }
    }

    /** A dead letter as the audit needs it: its reason, and when the job wrote it (its record timestamp). */
    private record DeadLetterRecord(String reason, long writtenTime) {}

    /** The dead letters per source record's coordinates. */
    private Map<String, List<DeadLetterRecord>> readDeadLetters(Duration readTimeout, AuditReport report) {
        Map<String, List<DeadLetterRecord>> reasons = new HashMap<>();
        reader.read(deadLetterTopic, readTimeout, record -> {
            report.deadLetterRecords++;
            String reason = String.valueOf(header(record, OnceflowHeaders.DEAD_LETTER_REASON));
            report.deadLettersByReason.merge(reason, 1L, Long::sum);
            reasons.computeIfAbsent(sourceCoordinates(record), source -> new ArrayList<>(1))
                    .add(new DeadLetterRecord(reason, record.timestamp()));
        });
        return reasons;
    }

    /**
     * Counts the record for its id, with its processor dead letters, or checks a poison record's
     * dead letter. A record after a live audit's bound is only counted for its id, in case another
     * record of the id is before the bound.
     *
     * @param deadLetters the reasons of the dead letters written for this record, or null if none
     */
    private void judgeInput(ConsumerRecord<byte[], byte[]> record, List<DeadLetterRecord> deadLetters,
            AuditScope scope, IdOutcomes ids, AuditReport report) {
        boolean covered = scope.covers(record.topic(), record.partition(), record.offset());
        IngestResult result = classify(record);
        List<DeadLetterRecord> written = deadLetters == null ? List.of() : deadLetters;
        List<String> reasons = written.stream().map(DeadLetterRecord::reason).toList();
        if (covered) {
            report.inputRecords++;
        } else {
            report.inFlightInputRecords++;
        }
        String source = coordinates(record);
        if (result.isAccepted()) {
            String id = result.event.messageId;
            ids.accepted(id, covered);
            if (covered) {
                report.acceptedRecords++;
            }
            for (DeadLetterRecord dead : written) {
                String reason = dead.reason();
                if (fromProcessor(reason)) {
                    ids.processorDeadLetter(id, reason, record.timestamp(), dead.writtenTime());
                } else if (covered) {
                    report.wrongReasonDeadLetters.add(source + " " + reason + " (the job accepts the record)");
                } else {
                    report.inFlightDeadLetters++;
                }
            }
            return;
        }
        if (!covered) {
            report.inFlightDeadLetters += reasons.size();
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

    /**
     * Weighs each row that counts more than one delivery against the input: a row written more
     * often than its id came in is a replay that reached the sink; with one output record, the row
     * absorbed real redeliveries.
     *
     * @param redelivered the deliveries of each expected id whose row counts more than one
     * @param derivedFrom the input id of each derived id
     */
    private static void weighRedeliveries(Map<String, Integer> redelivered, Map<String, String> derivedFrom,
            OutputReconciliation output, IdOutcomes ids, AuditReport report) {
        redelivered.forEach((id, deliveries) -> {
            int records = ids.records(derivedFrom.getOrDefault(id, id));
            int outputs = derivedFrom.containsKey(id) ? output.derivedRecords(id) : ids.outputs(id);
            if (deliveries > records) {
                report.overDeliveredRows.add(id + " x" + deliveries + " (" + records + " input records)");
            } else if (outputs == 1) {
                report.absorbedRedeliveries.add(id + " x" + deliveries);
            }
        });
    }

    IngestResult classify(ConsumerRecord<byte[], byte[]> record) {
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

    static String coordinates(ConsumerRecord<?, ?> record) {
        return record.topic() + "/" + record.partition() + "/" + record.offset();
    }

    /** The coordinates of the input record an output or dead-letter record names in its headers. */
    static String sourceCoordinates(ConsumerRecord<?, ?> record) {
        return header(record, OnceflowHeaders.SOURCE_TOPIC) + "/" + header(record, OnceflowHeaders.SOURCE_PARTITION)
                + "/" + header(record, OnceflowHeaders.SOURCE_OFFSET);
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
