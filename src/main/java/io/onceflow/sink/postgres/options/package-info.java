/**
 * The settings of a PostgreSQL sink, read by its public face and by its internals alike: the
 * connection, the tables and their naming rules, the writer, the optional results topic, and how a
 * job starts. Names no other package of onceflow.
 */
package io.onceflow.sink.postgres.options;
