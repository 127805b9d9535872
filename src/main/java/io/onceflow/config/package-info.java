/**
 * The onceflow job configuration: {@link io.onceflow.config.OnceflowConfig} reads command-line
 * arguments, an optional properties file and the environment, and validates everything before the
 * Flink job graph is built, reporting every problem at once in a {@link
 * io.onceflow.config.ConfigException}. Secret values never appear in its output (see {@link
 * io.onceflow.config.Secrets}).
 */
package io.onceflow.config;
