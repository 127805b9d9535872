package io.onceflow.testing;

import org.apache.flink.api.connector.sink2.Committer.CommitRequest;

/** A commit request outside Flink's runtime, remembering how the committer answered it. */
public final class RecordingCommitRequest<C> implements CommitRequest<C> {
    public enum Outcome { COMMITTED, ALREADY_COMMITTED, RETRY_LATER, FAILED }

    private final C committable;
    private int retries;
    public Outcome outcome = Outcome.COMMITTED;
    /** What the committer gave as the reason of a failure; null unless FAILED. */
    public Throwable failure;

    public RecordingCommitRequest(C committable) {
        this.committable = committable;
    }

    /** Ready for another round, as Flink's committer operator re-offers a request to retry. */
    public RecordingCommitRequest<C> retried() {
        retries++;
        outcome = Outcome.COMMITTED;
        return this;
    }

    @Override
    public C getCommittable() {
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
    public void updateAndRetryLater(C committable) {
        outcome = Outcome.RETRY_LATER;
    }

    @Override
    public void signalAlreadyCommitted() {
        outcome = Outcome.ALREADY_COMMITTED;
    }
}
