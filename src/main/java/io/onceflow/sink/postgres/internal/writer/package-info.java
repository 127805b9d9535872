/**
 * Internal. Writing rows: the exactly-once writer (one transaction per checkpoint, prepared at the
 * barrier) and the at-least-once writer, the row buffer and upsert statements, the isolation of rows
 * the database refuses, and the background thread that executes full batches.
 */
package io.onceflow.sink.postgres.internal.writer;
