/**
 * Internal. The PostgreSQL sink's tables: one class per table that alone spells its columns and
 * holds every statement about it ({@code EventsTable}, {@code RejectsTable}, {@code CommitLogTable},
 * {@code RunsTable}, {@code WritersTable}), their creation and migrations ({@code PostgresSchema}),
 * the server settings the sink needs ({@code ServerChecks}) and the identifier rule
 * ({@code SqlIdentifiers}).
 */
package io.onceflow.sink.postgres.internal.schema;
