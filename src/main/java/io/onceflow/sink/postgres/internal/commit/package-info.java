/**
 * Internal. What happens after a checkpoint: the committer ({@code COMMIT PREPARED} once Flink
 * completed the checkpoint), recovery of prepared transactions left by failed attempts, the
 * transaction ids (gids), and the
 * committables and writer state with their serializers (part of the savepoint format).
 */
package io.onceflow.sink.postgres.internal.commit;
