package io.onceflow.sink.kafka;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.testing.RecordingCommitRequest;
import org.apache.flink.connector.kafka.sink.KafkaCommittable;
import org.junit.jupiter.api.Test;

/**
 * A woken zombie: a TaskManager paused past the heartbeat timeout while the job restarted, resumed
 * after its successor pre-committed the transaction of a completed checkpoint. If it was paused in
 * its Kafka writer's start, the writer restores the same checkpoint N as its successor and, in {@code
 * ExactlyOnceKafkaWriter.initialize}, calls {@code initTransactions} on the ids it aborts and the one
 * it opens: with one prefix for all attempts those were {@code <prefix>-<subtask>-(N+1)...}, its
 * successor's. The successor's transaction was aborted and its committer dropped the committable
 * (ProducerFenced): the dead letters of a completed checkpoint were lost (chaos seed
 * 17231862991756). Fails with the attempt tags of {@link AttemptTags} removed (tried).
 */
class ZombieKafkaWriterTest {

    @Test
    void aWokenWritersStartLeavesItsSuccessorsTransactionAlone() throws Exception {
        SinkAttempts attempts = new SinkAttempts("zombie");
        // the successor (attempt 2) restored checkpoint N, wrote a dead letter, and checkpoint N+1 completed
        var successor = attempts.writer(2);
        KafkaCommittable committable = attempts.writeAndPrecommit(successor, 7, SinkAttempts.RESTORED + 1);

        // the zombie (attempt 1, restored the same checkpoint N) wakes up inside its writer's start
        var zombie = attempts.writer(1);

        // the successor's committer, notified of checkpoint N+1's completion
        RecordingCommitRequest<KafkaCommittable> request = attempts.commit(committable, 2);
        zombie.close();
        successor.close();

        assertThat(request.failure).as("the successor's commit").isNull();
        assertThat(attempts.readCommitted()).as("dead letters committed").isEqualTo(1);
    }

    @Test
    void aRestoredCommittableCommitsThroughAFreshCommitter() throws Exception {
        // a failure between a checkpoint's completion and its commit: the restored committer resumes
        // the transaction in a fresh producer (transactions v2 broker), under another attempt's tag
        SinkAttempts attempts = new SinkAttempts("zombie-control");
        var writer = attempts.writer(2);
        KafkaCommittable committable = attempts.writeAndPrecommit(writer, 42, SinkAttempts.RESTORED + 1);
        writer.close();

        RecordingCommitRequest<KafkaCommittable> request = attempts.commit(attempts.restored(committable), 3);

        assertThat(request.failure).as("commit of the restored committable").isNull();
        assertThat(attempts.readCommitted()).isEqualTo(1);
    }

    @Test
    void eachAttemptWritesUnderItsOwnTagAndItsCommitterUnderTheSame() throws Exception {
        SinkAttempts attempts = new SinkAttempts("zombie-tags");
        var first = attempts.writer(1);
        var second = attempts.writer(2);
        String firstId = attempts.writeAndPrecommit(first, 1, SinkAttempts.RESTORED + 1).getTransactionalId();
        String secondId = attempts.writeAndPrecommit(second, 2, SinkAttempts.RESTORED + 1).getTransactionalId();

        TransactionName firstName =
                TransactionName.parse(attempts.sinkPrefix(), firstId).orElseThrow();
        TransactionName secondName =
                TransactionName.parse(attempts.sinkPrefix(), secondId).orElseThrow();
        assertThat(firstName.tag()).isNotEqualTo(secondName.tag());
        assertThat(firstName.checkpoint()).isEqualTo(secondName.checkpoint()).isEqualTo(SinkAttempts.RESTORED + 1);
        // the connector's committer hands committed producers back to its writer by prefix: under
        // the same tag, the writer's state stops listing a committed transaction
        KafkaCommittable committable = attempts.writeAndPrecommit(second, 3, SinkAttempts.RESTORED + 2);
        try (var committer = attempts.sink.createCommitter(SinkAttempts.committerContext(2))) {
            RecordingCommitRequest<KafkaCommittable> request = new RecordingCommitRequest<>(committable);
            committer.commit(java.util.List.of(request));
            assertThat(request.failure).isNull();
            assertThat(second.snapshotState(SinkAttempts.RESTORED + 3))
                    .flatExtracting(state -> state.getPrecommittedTransactionalIds())
                    .extracting(transaction -> transaction.getTransactionalId())
                    .doesNotContain(committable.getTransactionalId());
        }
        first.close();
        second.close();
    }
}
