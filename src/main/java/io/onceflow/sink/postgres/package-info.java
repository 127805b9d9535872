/**
 * The PostgreSQL sinks of onceflow: {@link io.onceflow.sink.postgres.PostgresSink}, exactly-once
 * with PostgreSQL's two-phase commit ({@code PREPARE TRANSACTION} per writer subtask and checkpoint,
 * {@code COMMIT PREPARED} by the committer after the checkpoint completed, recovery by gid), and an
 * at-least-once variant from {@link io.onceflow.sink.postgres.PostgresSinkBuilder#buildAtLeastOnce()}.
 * Both upsert by message id into the event table of {@link io.onceflow.sink.postgres.internal.schema.PostgresSchema}.
 * Classes marked {@code @Internal} are not API.
 */
package io.onceflow.sink.postgres;
