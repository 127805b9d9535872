/**
 * Internal. Who may write: the runs of a sink prefix (a submission registers one; the newest owns
 * the prefix) and the claims of writer attempts on their subtask index, with advisory locks and a
 * lease, so that a paused or cut-off attempt that wakes up cannot undo its successor's work.
 */
package io.onceflow.sink.postgres.internal.fencing;
