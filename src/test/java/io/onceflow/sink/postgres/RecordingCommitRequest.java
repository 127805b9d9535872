package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.internal.commit.PostgresCommittable;
import org.apache.flink.api.connector.sink2.Committer.CommitRequest;

/** A commit request outside Flink's runtime, remembering how the committer answered it. */
final class RecordingCommitRequest implements CommitRequest<PostgresCommittable> {
    enum Outcome { COMMITTED, ALREADY_COMMITTED, RETRY_LATER, FAILED }

    private final PostgresCommittable committable;
    private int retries;
    Outcome outcome = Outcome.COMMITTED;
    /** What the committer gave as the reason of a failure; null unless FAILED. */
    Throwable failure;

    RecordingCommitRequest(PostgresCommittable committable) {
        this.committable = committable;
    }

    /** Ready for another round, as Flink's committer operator re-offers a request to retry. */
    RecordingCommitRequest retried() {
        retries++;
        outcome = Outcome.COMMITTED;
        return this;
    }

    @Override
    public PostgresCommittable getCommittable() {
        return committable;
    }

    @Override
    public int getNumberOfRetries() {
        return retries;
    }

    @Override
    public void signalFailedWithKnownReason(Throwable t) {
        outcome = Outcome.FAILED;
        failure = t;
    }

    @Override
    public void signalFailedWithUnknownReason(Throwable t) {
        outcome = Outcome.FAILED;
        failure = t;
    }

    @Override
    public void retryLater() {
        outcome = Outcome.RETRY_LATER;
    }

    @Override
    public void updateAndRetryLater(PostgresCommittable committable) {
        outcome = Outcome.RETRY_LATER;
    }

    @Override
    public void signalAlreadyCommitted() {
        outcome = Outcome.ALREADY_COMMITTED;
    }
}
