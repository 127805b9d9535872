package io.onceflow.tools.audit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.onceflow.cli.CannotRunException;
import io.onceflow.config.ConfigException;
import io.onceflow.testing.PipelineScenario;
import java.time.Duration;
import java.util.Map;
import java.util.Properties;
import java.util.stream.Stream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The audit of a running job, against the real broker and database, with the job's records written
 * here ({@link JobRecords}) and its consumer group's offsets committed by hand, as the job commits
 * them when a checkpoint completes: what lies after them is in flight, not lost; an output its sink
 * commits a moment after the offsets is found by looking again; and an audit of the whole topics
 * warns when a transaction is open on them.
 */
class LiveAuditTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(60);

    private final PipelineScenario scenario = new PipelineScenario("live-audit").withPostgres();
    private JobRecords job;

    @BeforeEach
    void writeTables() throws Exception {
        job = new JobRecords(scenario);
    }

    @AfterEach
    void closeProducer() {
        job.close();
    }

    @Test
    void aLiveAuditCoversTheInputUpToTheCommittedOffsetsAndLeavesTheRestInFlight() throws Exception {
        for (String id : new String[] {"done-1", "done-2"}) {
            RecordMetadata record = job.in(id, 0, null);
            job.output(id, record);
            job.row(id, record, 1);
        }
        job.in("mixed-1", 1, null);
        // the job met the id first in partition 2, after that partition's bound: its output names that record
        RecordMetadata afterTheBound = job.in("mixed-1", 2, null);
        job.output("mixed-1", afterTheBound);
        job.row("mixed-1", afterTheBound, 1);
        commitOffsets(Map.of(0, 2L, 1, 1L, 2, 0L)); // partition 3: none committed
        RecordMetadata inFlight = job.in("flight-1", 0, null);
        job.output("flight-1", inFlight);
        job.row("flight-1", inFlight, 1);
        job.in("flight-2", 0, null);
        job.poison("poison-in-flight");
        job.in("uncommitted-1", 3, null);

        AuditReport report = liveAudit(Duration.ZERO, duration -> {});

        assertThat(report.problems()).isEmpty();
        assertThat(report.live()).isTrue();
        assertThat(report.uniqueIds()).isEqualTo(3);
        assertThat(report.outputIds()).as("mixed-1's output counts as its own, wherever its source").isEqualTo(3);
        assertThat(report.derivedIds()).isZero();
        String in = scenario.inputTopic;
        assertThat(report.toText()).contains(
                "live audit: the input up to the offsets group '" + scenario.config().groupId()
                        + "' committed at the job's last completed checkpoint\n",
                "  bound                     " + in + "-0 < 2, " + in + "-1 < 1, " + in + "-2 < 0\n",
                "  no committed offset       " + in + "-3 (not audited)\n",
                "  in flight (not audited)   5 input records (3 ids), 1 output records, 0 dead letters, 1 rows\n");
        assertThat(report.toJson()).contains("\"live\" : true", "\"" + in + "-3\" : null");

        assertThat(scenario.audit().problems()).as("the same topics audited whole").hasSize(3)
                .anySatisfy(problem -> assertThat(problem).startsWith("2 ids lost: no output record and no dead letter"))
                .anySatisfy(problem -> assertThat(problem).startsWith("1 poison records missing"));
    }

    @Test
    void anOutputTheSinkCommitsAfterTheOffsetsIsFoundByLookingAgain() throws Exception {
        RecordMetadata record = job.in("slow-1", 0, null);
        job.row("slow-1", record, 1);
        commitOffsets(Map.of(0, 1L));
        try (KafkaProducer<byte[], byte[]> sink = transactionalProducer()) {
            sink.beginTransaction();
            job.output(sink, "slow-1", record); // the checkpoint's output, not committed yet

            AuditReport report = liveAudit(Duration.ofSeconds(30), duration -> sink.commitTransaction());

            assertThat(report.problems()).isEmpty();
            assertThat(report.rechecks()).isEqualTo(1);
            assertThat(report.toText()).containsPattern("  re-checked                1 times over [0-9]+s \\(the sinks commit after the offsets\\)\n");
        }
    }

    @Test
    void whatPersistsOnceTheRecheckTimeIsOverIsReported() throws Exception {
        RecordMetadata record = job.in("lost-1", 0, null);
        job.row("lost-1", record, 1);
        commitOffsets(Map.of(0, 1L));

        AuditReport report = liveAudit(Duration.ofMillis(300), duration -> Thread.sleep(duration.toMillis()));

        assertThat(report.problems()).containsExactly("1 ids lost: no output record and no dead letter, e.g. [lost-1]");
        assertThat(report.rechecks()).isPositive();
    }

    @Test
    void anAuditOfTheWholeTopicsWarnsOfATransactionOpenOnThem() throws Exception {
        RecordMetadata record = job.in("pending-1", 0, null);
        job.row("pending-1", record, 1);
        try (KafkaProducer<byte[], byte[]> sink = transactionalProducer()) {
            sink.beginTransaction();
            job.output(sink, "pending-1", record);

            AuditReport report = scenario.audit();

            assertThat(report.warnings()).singleElement().satisfies(warning -> assertThat(warning)
                    .startsWith("a transaction is open on " + scenario.outputTopic + " (partitions [")
                    .endsWith("To audit a running job, use --live."));
            assertThat(report.toText()).startsWith("WARNING: a transaction is open on ");
            assertThat(report.problems()).as("what it holds looks lost")
                    .contains("1 ids lost: no output record and no dead letter, e.g. [pending-1]");
            sink.abortTransaction();
        }
    }

    @Test
    void anAuditOfTheWholeTopicsWarnsOfInputAfterTheJobsCommittedOffsets() throws Exception {
        for (String id : new String[] {"done-1", "unread-1"}) {
            RecordMetadata record = job.in(id, 0, null);
            job.row(id, record, 1);
            if (id.startsWith("done")) {
                job.output(id, record);
            }
        }
        Audit audit = AuditCommand.forConfig(scenario.config());
        assertThat(AuditCommand.wholeTopicAudit(audit, scenario.config(), TIMEOUT).warnings()).singleElement()
                .satisfies(warning -> assertThat(warning).startsWith("could not read how far the job has checkpointed"
                        + " its input (input.group.id: the consumer group '" + scenario.config().groupId()
                        + "' has no committed offsets"));
        commitOffsets(Map.of(0, 1L)); // an idle running job, or one stopped before it checkpointed unread-1

        AuditReport behind = AuditCommand.wholeTopicAudit(audit, scenario.config(), TIMEOUT);

        assertThat(behind.warnings()).singleElement().satisfies(warning -> assertThat(warning)
                .startsWith("1 input records lie after the offsets the job's consumer group committed at its last"
                        + " completed checkpoint, e.g. [" + scenario.inputTopic + "/0/1]")
                .endsWith("Audit a running job with --live, or wait until the job has drained."));

        commitOffsets(Map.of(0, 2L)); // drained: everything read and checkpointed
        assertThat(AuditCommand.wholeTopicAudit(audit, scenario.config(), TIMEOUT).warnings()).isEmpty();
    }

    @Test
    void aLiveAuditNeedsTheGroupsCommittedOffsetsAndALiveRecheckNeedsLive() {
        assertThatThrownBy(() -> AuditCommand.liveScope(scenario.config(), TIMEOUT))
                .isInstanceOf(CannotRunException.class)
                .hasMessage("input.group.id: the consumer group '" + scenario.config().groupId() + "' has no committed"
                        + " offsets for the input topics [" + scenario.inputTopic + "] at "
                        + scenario.config().bootstrapServers() + ": the job has completed no checkpoint yet, or this"
                        + " is not its group (a live audit covers the input up to the offsets the job commits there at"
                        + " each checkpoint). Wait for the job's first completed checkpoint, or audit a stopped job"
                        + " without --live.");
        assertThatThrownBy(() -> AuditCommand.execute(Stream.concat(Stream.of("--recheck-for", "5s"),
                        Stream.of(scenario.arguments())).toArray(String[]::new)))
                .isInstanceOf(ConfigException.class)
                .hasMessageContaining("--recheck-for: applies to a live audit only. Add --live to audit a running job");
    }

    private AuditReport liveAudit(Duration recheckFor, Audit.Pause pause) {
        return AuditCommand.forConfig(scenario.config()).runLive(TIMEOUT, AuditCommand.liveScope(scenario.config(), TIMEOUT),
                recheckFor, Duration.ofMillis(100), pause);
    }

    /** Commits the group's offsets as the job's source does when a checkpoint completes. */
    private void commitOffsets(Map<Integer, Long> offsets) throws Exception {
        Properties properties = new Properties();
        properties.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, scenario.kafka().bootstrapServers());
        try (Admin admin = Admin.create(properties)) {
            Map<TopicPartition, OffsetAndMetadata> committed = new java.util.HashMap<>();
            offsets.forEach((partition, offset) ->
                    committed.put(new TopicPartition(scenario.inputTopic, partition), new OffsetAndMetadata(offset)));
            admin.alterConsumerGroupOffsets(scenario.config().groupId(), committed).all().get();
        }
    }

    /** A producer as the job's Kafka sink has one: its output stays invisible until it commits. */
    private KafkaProducer<byte[], byte[]> transactionalProducer() {
        Properties properties = new Properties();
        properties.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, scenario.kafka().bootstrapServers());
        properties.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, scenario.name + "-sink");
        KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(properties, new ByteArraySerializer(), new ByteArraySerializer());
        producer.initTransactions();
        return producer;
    }
}
