package io.onceflow.sink.postgres.internal;

import org.apache.flink.runtime.throwable.ThrowableAnnotation;
import org.apache.flink.runtime.throwable.ThrowableType;

/**
 * An attempt of a job found that a newer run of its sink prefix was registered: a later submission
 * (an upgrade from a savepoint, a second job given the same prefix) replaced this job. The job must
 * stop rather than restart: each restart would create Kafka producers with the transactional ids the
 * newer job uses, fencing its producers and aborting its open transactions, a completed
 * checkpoint's included. So Flink treats it as non-recoverable and fails the job without a restart.
 */
@ThrowableAnnotation(ThrowableType.NonRecoverableError)
public final class ReplacedRunException extends IllegalStateException {
    private static final long serialVersionUID = 1L;

    public ReplacedRunException(String message) {
        super(message);
    }
}
