/**
 * Internal. What every stage of the PostgreSQL sink shares: its validated settings
 * ({@code PostgresSinkConfig}), its connections and the session settings they pin, its metrics, and
 * the test hooks into the two-phase protocol.
 */
package io.onceflow.sink.postgres.internal;
