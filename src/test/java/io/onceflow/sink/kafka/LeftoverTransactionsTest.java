package io.onceflow.sink.kafka;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.testing.Eventually;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import org.apache.flink.connector.kafka.sink.KafkaCommittable;
import org.apache.flink.connector.kafka.sink.KafkaWriterState;
import org.apache.flink.streaming.api.connector.sink2.CommittableMessage;
import org.apache.flink.streaming.api.connector.sink2.CommittableSummary;
import org.apache.flink.streaming.api.operators.ProcessOperator;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.util.OneInputStreamOperatorTestHarness;
import org.junit.jupiter.api.Test;

/**
 * What {@link LeftoverTransactions} aborts, on a real broker: the open transactions of dead attempts
 * named after the restored checkpoint and up to this attempt's first barrier, once a committed
 * checkpoint from that barrier on passes; nothing before, nothing named after the barrier (a later
 * attempt's), nothing of another subtask's class.
 */
class LeftoverTransactionsTest {
    private static final long FIRST_BARRIER = 9;

    @Test
    void parsesTaggedAndUntaggedIdsOfItsSinkOnly() {
        assertThat(TransactionName.parse("p-dlq", "p-dlq-gabcd1234-3-17"))
                .contains(new TransactionName("gabcd1234", 3, 17));
        // written before tags
        assertThat(TransactionName.parse("p-dlq", "p-dlq-3-17"))
                .contains(new TransactionName("", 3, 17));
        // another job's sink whose prefix starts with this one's, the probe producer's id, foreign ids
        assertThat(TransactionName.parse("p-dlq", "p-dlq-x-output-gabcd1234-3-17")).isEmpty();
        assertThat(TransactionName.parse("p-dlq", "p-dlq-probe")).isEmpty();
        assertThat(TransactionName.parse("p-dlq", "p-dlq-other-3-17")).isEmpty();
        assertThat(TransactionName.parse("p-dlq", "p-output-gabcd1234-3-17")).isEmpty();
    }

    @Test
    void abortsWhatDeadAttemptsLeftOpenOnlyOnceItsFirstCheckpointCompleted() throws Exception {
        SinkAttempts attempts = new SinkAttempts("leftovers");
        // attempt 1 restored checkpoint 5 and was killed with a dead letter in its transaction (n = 6)
        var killed = attempts.writer(1, 0, 2);
        attempts.writeAndLeaveOpen(killed, 1);
        // the same on subtask 1: another subtask's class at parallelism 2
        var killedNeighbour = attempts.writer(1, 1, 2);
        attempts.writeAndLeaveOpen(killedNeighbour, 2);
        // a later attempt's open transaction, named after a barrier past this attempt's first (n = 12)
        var later = attempts.writer(4, 0, 2);
        later.snapshotState(11);
        attempts.writeAndLeaveOpen(later, 3);
        List<String> before = open(attempts);
        assertThat(before).hasSize(3);

        try (var harness = harness(attempts, 0, 2)) {
            harness.snapshot(FIRST_BARRIER, 1);
            // the restored checkpoint's committables, re-committed at the start: no proof yet
            harness.processElement(committed(SinkAttempts.RESTORED));
            harness.processElement(committed(FIRST_BARRIER - 1));
            assertThat(open(attempts)).as("before the first checkpoint completed").isEqualTo(before);

            harness.processElement(committed(FIRST_BARRIER));
            Eventually.await("the dead attempt's transaction aborted", Duration.ofSeconds(30), Duration.ofMillis(100),
                    () -> open(attempts).size() == 2);
        }

        assertThat(open(attempts)).as("left open").containsExactlyInAnyOrder(
                id(attempts, before, 1, 6), id(attempts, before, 0, 12));
        killedNeighbour.close();
        later.close();
    }

    @Test
    void aRescaledRestoreAbortsWhatEachRestoredAttemptLeftAfterTheCheckpoint() throws Exception {
        SinkAttempts attempts = new SinkAttempts("restored-leftovers");
        // two subtasks of one run at parallelism 2, each with a transaction open after checkpoint 6,
        // and their states as checkpoint 6 recorded them
        long checkpoint = SinkAttempts.RESTORED + 1;
        var zero = attempts.writer(1, 0, 2);
        var one = attempts.writer(1, 1, 2);
        List<KafkaWriterState> states = new ArrayList<>(zero.snapshotState(checkpoint));
        states.addAll(one.snapshotState(checkpoint));
        attempts.writeAndLeaveOpen(zero, 1);
        attempts.writeAndLeaveOpen(one, 2);
        // another attempt's (a successor's) open transaction after checkpoint 6: not one of the restored
        var other = attempts.writer(2, 1, 2);
        String othersTag = TransactionName.tagOf(attempts.sinkPrefix(),
                other.snapshotState(checkpoint).get(0).getTransactionalIdPrefix()).orElseThrow();
        attempts.writeAndLeaveOpen(other, 3);
        assertThat(open(attempts)).hasSize(3);

        // the restore at parallelism 1 gets both states; the connector probes only the first one's prefix
        LeftoverTransactions.abortOfRestoredAttempts(attempts.kafka.bootstrapServers(), new Properties(),
                attempts.sinkPrefix(), states, checkpoint);

        assertThat(open(attempts)).singleElement().satisfies(id -> assertThat(
                TransactionName.parse(attempts.sinkPrefix(), id).orElseThrow().tag()).isEqualTo(othersTag));
        other.close();
    }

    @Test
    void anotherJobsTransactionsAreNeverThisJobs() throws Exception {
        // a job whose prefix is this one's dead-letter sink prefix: its dead-letter ids start with ours
        SinkAttempts attempts = new SinkAttempts("prefix-of-another");
        String otherJobsId = attempts.sinkPrefix() + "-dlq-" + AttemptTags.newTag() + "-0-6";
        try (var producer = LeftoverTransactionsIT.openTransaction(attempts.kafka, attempts.topic, otherJobsId)) {
            assertThat(PendingKafkaTransactions.list(attempts.kafka.bootstrapServers(), new Properties(),
                    attempts.prefix)).doesNotContain(otherJobsId);
            assertThat(open(attempts)).doesNotContain(otherJobsId);
        }
    }

    private static OneInputStreamOperatorTestHarness<CommittableMessage<KafkaCommittable>, Void> harness(
            SinkAttempts attempts, int subtask, int parallelism) throws Exception {
        var harness = new OneInputStreamOperatorTestHarness<CommittableMessage<KafkaCommittable>, Void>(
                new ProcessOperator<>(new LeftoverTransactions(attempts.kafka.bootstrapServers(), new Properties(),
                        attempts.sinkPrefix())), 128, parallelism, subtask);
        harness.setRestoredCheckpointId(SinkAttempts.RESTORED);
        harness.initializeEmptyState();
        harness.open();
        return harness;
    }

    private static StreamRecord<CommittableMessage<KafkaCommittable>> committed(long checkpoint) {
        return new StreamRecord<>(new CommittableSummary<>(0, 2, checkpoint, 0, 0));
    }

    private static List<String> open(SinkAttempts attempts) throws Exception {
        return PendingKafkaTransactions.ongoing(attempts.kafka.bootstrapServers(), new Properties(),
                attempts.sinkPrefix());
    }

    private static String id(SinkAttempts attempts, List<String> ids, int subtask, long checkpoint) {
        return ids.stream().filter(id -> TransactionName.parse(attempts.sinkPrefix(), id)
                .filter(name -> name.subtask() == subtask && name.checkpoint() == checkpoint).isPresent())
                .findFirst().orElseThrow(() -> new AssertionError("no open " + subtask + "-" + checkpoint + " in " + ids));
    }
}
