/**
 * The PostgreSQL sinks of onceflow, public face: {@link io.onceflow.sink.postgres.PostgresSink},
 * exactly-once with PostgreSQL's two-phase commit ({@code PREPARE TRANSACTION} per writer subtask
 * and checkpoint, {@code COMMIT PREPARED} by the committer after the checkpoint completed, recovery
 * by gid), and an at-least-once variant from
 * {@link io.onceflow.sink.postgres.PostgresSinkBuilder#buildAtLeastOnce()}. Both upsert by message
 * id into the events table.
 *
 * <p>The builder takes the option groups of {@link io.onceflow.sink.postgres.options} and builds the
 * {@link io.onceflow.sink.postgres.PostgresRunRegistry}; registering a run there
 * ({@link io.onceflow.sink.postgres.RegisteredRun}) is the only way to an exactly-once sink.
 *
 * <p>The implementation lives in {@code internal} ({@code @Internal}: not API), which reads the
 * options but never this package, so the three packages form no cycle.
 */
package io.onceflow.sink.postgres;
