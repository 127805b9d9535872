/**
 * The PostgreSQL sinks of onceflow, public face: {@link io.onceflow.sink.postgres.PostgresSink},
 * exactly-once with PostgreSQL's two-phase commit ({@code PREPARE TRANSACTION} per writer subtask
 * and checkpoint, {@code COMMIT PREPARED} by the committer after the checkpoint completed, recovery
 * by gid), and an at-least-once variant from
 * {@link io.onceflow.sink.postgres.PostgresSinkBuilder#buildAtLeastOnce()}. Both upsert by message
 * id into the events table.
 *
 * <p>The builder takes three option groups ({@link io.onceflow.sink.postgres.PostgresConnectionOptions},
 * {@link io.onceflow.sink.postgres.PostgresTableOptions}, {@link io.onceflow.sink.postgres.PostgresWriterOptions})
 * and builds the {@link io.onceflow.sink.postgres.PostgresRunRegistry}; registering a run there
 * ({@link io.onceflow.sink.postgres.RegisteredRun}) is the only way to an exactly-once sink.
 *
 * <p>The implementation lives in {@code internal} packages, one per stage of a sink's life:
 * {@code internal.schema} (each table's SQL, DDL and migrations, server checks),
 * {@code internal.writer} (writing rows), {@code internal.fencing} (runs and writer claims) and
 * {@code internal.commit} (committer, recovery, effects, transaction ids, checkpointed state). They
 * are {@code @Internal}: not API.
 */
package io.onceflow.sink.postgres;
