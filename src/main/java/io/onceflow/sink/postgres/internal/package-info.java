/**
 * Internal. The PostgreSQL sink's implementation, one package so that its classes can stay
 * package-private. By stage of a sink's life:
 *
 * <ul>
 *   <li>shared: the validated settings ({@code PostgresSinkConfig}), connections and the session
 *       settings they pin ({@code PostgresConnections}), SQLSTATEs ({@code SqlStates}), metrics and
 *       the test hooks into the two-phase protocol;
 *   <li>the tables: one class per table that alone spells its columns and holds every statement about
 *       it ({@code EventsTable}, {@code RejectsTable}, {@code CommitLogTable}, {@code RunsTable},
 *       {@code WritersTable}, {@code PendingEffectsTable}...), their creation and migrations
 *       ({@code PostgresSchema}) and the server settings the sink needs ({@code ServerChecks});
 *   <li>writing: the exactly-once writer (one transaction per checkpoint, prepared at the barrier),
 *       the at-least-once writer, upserts, the isolation of rows the database refuses;
 *   <li>who may write: the runs of a sink prefix ({@code SinkRuns}) and the claims of writer attempts
 *       on their subtask index at a checkpoint barrier ({@code WriterClaim}), with advisory locks and
 *       a lease, so that a paused attempt that wakes cannot undo its successor's work;
 *   <li>committing: the committer, recovery of prepared transactions, the transaction ids (gids),
 *       committables and writer state with their serializers (part of the savepoint format);
 *   <li>the business effects: a worker per writer subtask ({@code EffectWorker}) drains the queue of
 *       effects whose inbox rows have committed, off the task thread, in transactions of its own.
 * </ul>
 */
package io.onceflow.sink.postgres.internal;
