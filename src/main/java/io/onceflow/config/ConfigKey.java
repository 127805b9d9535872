package io.onceflow.config;

import static java.util.Comparator.comparingInt;

import io.onceflow.ingest.JsonLimits;
import io.onceflow.sink.postgres.options.PostgresTableOptions;
import io.onceflow.sink.postgres.options.PostgresWriterOptions;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.function.Function;
import java.util.stream.Collectors;

/**
 * Every configuration key with its default and description: the single source for validation of
 * key names, defaults and {@link OnceflowConfig#usage()}.
 */
enum ConfigKey {
    BOOTSTRAP_SERVERS(
            "kafka.bootstrap.servers",
            Presence.REQUIRED,
            "Kafka brokers as host:port[,host:port...]."),
    INPUT_TOPICS("input.topics", Presence.REQUIRED, "Comma-separated Kafka topics to read."),
    INPUT_GROUP_ID(
            "input.group.id",
            Presence.REQUIRED,
            "Kafka consumer group; offsets live in Flink checkpoints and are committed to the group"
                    + " only for monitoring."),
    INPUT_STARTING_OFFSETS(
            "input.starting.offsets",
            "committed-or-earliest",
            "Where to start without a checkpoint or savepoint: committed-or-earliest,"
                    + " committed-or-latest, earliest or latest."),
    MESSAGE_ID_SOURCE(
            "message.id.source",
            "header:message-id",
            "Where each message's id is: header:<name>, json:<JSON pointer> (e.g. json:/id) or"
                    + " key."),
    MESSAGE_MAX_BYTES(
            "message.max.bytes",
            "1048576",
            "Largest accepted message value in bytes (1..104857600); larger ones are dead-lettered."),
    MESSAGE_ID_MAX_LENGTH(
            "message.id.max.length",
            "256",
            "Longest accepted message id in characters (1..4096)."),
    JSON_MAX_NESTING_DEPTH(
            "json.max.nesting.depth",
            String.valueOf(JsonLimits.DEFAULTS.maxNestingDepth()),
            "Deepest nesting of JSON objects and arrays in a value; deeper values are dead-lettered as"
                    + " JSON_LIMIT_EXCEEDED."),
    JSON_MAX_NUMBER_LENGTH(
            "json.max.number.length",
            String.valueOf(JsonLimits.DEFAULTS.maxNumberLength()),
            "Most characters of one JSON number; longer ones are dead-lettered as JSON_LIMIT_EXCEEDED."),
    JSON_MAX_NAME_LENGTH(
            "json.max.name.length",
            String.valueOf(JsonLimits.DEFAULTS.maxNameLength()),
            "Most characters of one JSON field name; longer ones are dead-lettered as JSON_LIMIT_EXCEEDED."),
    JSON_MAX_STRING_LENGTH(
            "json.max.string.length",
            String.valueOf(JsonLimits.DEFAULTS.maxStringLength()),
            "Most characters of one JSON string; longer ones are dead-lettered as JSON_LIMIT_EXCEEDED."),
    DEDUP_TTL("dedup.ttl", "7d", "How long a message id is remembered to drop duplicates."),
    PROCESSOR_CLASS(
            "processor.class",
            Presence.OPTIONAL,
            "Your business logic: a class implementing io.onceflow.api.EventProcessor with a public"
                    + " no-argument constructor, packed in the job jar (a class in Flink's lib/ cannot see"
                    + " onceflow's classes in the job jar); default: events pass unchanged."),
    PROCESSOR_MAX_ATTEMPTS(
            "processor.max.attempts",
            "3",
            "Attempts at an event whose processor throws (1..100) before it is dead-lettered as"
                    + " PROCESSOR_FAILED; a TransientProcessingException is retried without limit."),
    PROCESSOR_RETRY_BACKOFF(
            "processor.retry.backoff",
            "100ms",
            "Pause before an event's first retry, doubled for each further retry up to"
                    + " processor.retry.backoff.max."),
    PROCESSOR_RETRY_BACKOFF_MAX(
            "processor.retry.backoff.max",
            "10s",
            "Longest pause between two retries; shorter than checkpoint.timeout, since a checkpoint"
                    + " waits for the event being retried."),
    OUTPUT_TOPIC("output.topic", Presence.REQUIRED, "Kafka topic for deduplicated messages."),
    DEAD_LETTER_TOPIC(
            "dead.letter.topic",
            Presence.REQUIRED,
            "Kafka topic for messages that cannot be processed."),
    TRANSACTIONAL_ID_PREFIX(
            "kafka.transactional.id.prefix",
            Presence.REQUIRED,
            "Prefix of the Kafka transactional ids ([a-zA-Z0-9._-], at most 100 characters); must"
                    + " stay the same across restarts and be unique among jobs on the cluster."),
    TRANSACTION_TIMEOUT(
            "kafka.transaction.timeout",
            Presence.OPTIONAL,
            "Kafka transaction timeout: Kafka output of a completed checkpoint survives an outage of up to"
                    + " this minus the longest checkpoint cycle, (checkpoint.tolerable.failures + 1) x"
                    + " max(checkpoint.interval, checkpoint.timeout + checkpoint.min.pause) + checkpoint.timeout;"
                    + " must exceed that cycle + restart.budget and be at most the brokers'"
                    + " transaction.max.timeout.ms. Default: the brokers' transaction.max.timeout.ms, read by the"
                    + " start check (kafka.transaction.timeout.broker.max when the job may not read it)."),
    BROKER_TRANSACTION_MAX_TIMEOUT(
            "kafka.transaction.timeout.broker.max",
            "15min",
            "The brokers' transaction.max.timeout.ms, for when the job may not read it (no DescribeConfigs on"
                    + " the cluster): then the default of kafka.transaction.timeout; raise it only after raising"
                    + " it on the brokers."),
    ACCEPT_LOSS_AFTER_SHORT_OUTAGE(
            "kafka.transaction.timeout.accept.loss.after.short.outage",
            "false",
            "true or false: whether the start check accepts a Kafka transaction timeout that lets output of a"
                    + " completed checkpoint survive an outage of less than "
                    + ValueParsers.format(OnceflowConfig.SHORTEST_OUTAGE_TO_SURVIVE) + " (the timeout minus the longest"
                    + " checkpoint cycle); after a longer outage the brokers abort its transactions and that"
                    + " output is lost."),
    CHECKPOINT_INTERVAL(
            "checkpoint.interval",
            "10s",
            "Time between checkpoints; output is committed, and so visible, at each checkpoint."),
    CHECKPOINT_TIMEOUT(
            "checkpoint.timeout", "2min", "A checkpoint taking longer than this is aborted."),
    CHECKPOINT_MIN_PAUSE(
            "checkpoint.min.pause",
            "0ms",
            "Least time between the end of one checkpoint and the start of the next."),
    CHECKPOINT_TOLERABLE_FAILURES(
            "checkpoint.tolerable.failures",
            "0",
            "Checkpoints that may fail in a row without failing the job (0..100). Each keeps the"
                    + " sinks' transactions open for another checkpoint: kafka.transaction.timeout"
                    + " and PostgreSQL's max_prepared_transactions are checked against it."),
    RESTART_BUDGET(
            "restart.budget",
            "7min",
            "Longest time from a failure to the restored job, which commits the transactions of the"
                    + " last completed checkpoint: noticing a silent TaskManager (Flink's heartbeat.timeout),"
                    + " the restart strategy's longest delay with its jitter, the wait for slots"
                    + " (slot.request.timeout) and the deployment; kafka.transaction.timeout is checked"
                    + " against it. The default covers flink-conf/config.yaml; raise it if your cluster"
                    + " waits longer."),
    FRESH_START_PENDING(
            "fresh.start.pending",
            "refuse",
            "What a start without a checkpoint or savepoint does when the sinks hold transactions"
                    + " of an earlier run: refuse (naming the latest retained checkpoint to resume"
                    + " from) or discard (roll them back, losing the output of checkpoints that"
                    + " completed but were not committed)."),
    CHECKPOINT_DIR(
            "checkpoint.dir",
            Presence.OPTIONAL,
            "Checkpoint storage URI, e.g. file:///var/onceflow/checkpoints or s3://bucket/onceflow;"
                    + " default: the cluster's setting."),
    PARALLELISM(
            "parallelism",
            Presence.OPTIONAL,
            "Job parallelism (1..32768); default: the cluster's setting."),
    DELIVERY_GUARANTEE(
            "delivery.guarantee",
            "exactly-once",
            "exactly-once (Kafka and PostgreSQL transactions) or at-least-once."),
    STATE_BACKEND(
            "state.backend",
            "rocksdb",
            "rocksdb (RocksDB with incremental checkpoints) or hashmap (JVM heap)."),
    POSTGRES_URL(
            "postgres.url",
            Presence.OPTIONAL,
            "JDBC URL jdbc:postgresql://host:port/database; setting it enables the PostgreSQL"
                    + " sink."),
    POSTGRES_USER(
            "postgres.user",
            Presence.REQUIRED,
            "Database user; required when postgres.url is set."),
    POSTGRES_PASSWORD(
            "postgres.password",
            Presence.OPTIONAL,
            "Database password (secret; pass it as ${ENV_VAR} or ${file:/absolute/path});"
                    + " default: empty."),
    POSTGRES_TABLE(
            "postgres.table",
            PostgresTableOptions.DEFAULT_EVENTS,
            "Table for deduplicated events, as table or schema.table."),
    POSTGRES_REJECTS_TABLE(
            "postgres.rejects.table",
            PostgresTableOptions.DEFAULT_REJECTS,
            "Table for rows the database refused (with the SQLSTATE and message), as table or"
                    + " schema.table."),
    POSTGRES_COMMIT_LOG_TABLE(
            "postgres.commit.log.table",
            PostgresTableOptions.DEFAULT_COMMIT_LOG,
            "Table in which the sink records its committed transactions, as table or"
                    + " schema.table."),
    POSTGRES_RUNS_TABLE(
            "postgres.runs.table",
            PostgresTableOptions.DEFAULT_RUNS,
            "Table in which the sink records each start of a job (a run), as table or"
                    + " schema.table."),
    POSTGRES_WRITERS_TABLE(
            "postgres.writers.table",
            PostgresTableOptions.DEFAULT_WRITERS,
            "Table in which the sink records which attempt of which run holds each writer"
                    + " subtask, as table or schema.table."),
    POSTGRES_SINK_PREFIX(
            "postgres.sink.prefix",
            Presence.OPTIONAL,
            "Names this job's transactions ([a-zA-Z0-9_], at most 40 characters); required when"
                    + " postgres.url is set. Unique among the jobs using the database, and the same"
                    + " across restarts and upgrades of one job."),
    POSTGRES_BATCH_SIZE(
            "postgres.batch.size",
            String.valueOf(PostgresWriterOptions.DEFAULT_BATCH_SIZE),
            "Rows per JDBC batch (1.." + PostgresWriterOptions.MAX_BATCH_SIZE + ")."),
    POSTGRES_HELD_EVENTS_MEMORY_BYTES(
            "postgres.held.events.memory.bytes",
            String.valueOf(PostgresWriterOptions.DEFAULT_HELD_EVENTS_MEMORY_BYTES),
            "Bytes of events a PostgreSQL writer holds in memory after a (re)start until its first checkpoint"
                    + " barrier (0.." + Integer.MAX_VALUE + "); beyond that it spills them to a file in"
                    + " java.io.tmpdir until the barrier."),
    POSTGRES_LOCK_TIMEOUT(
            "postgres.lock.timeout",
            ValueParsers.format(PostgresWriterOptions.DEFAULT_LOCK_TIMEOUT),
            "Longest wait of the sink's statements for a lock (PostgreSQL lock_timeout; 1ms..24d):"
                    + " a stuck lock becomes a restart instead of a hang."),
    POSTGRES_STATEMENT_TIMEOUT(
            "postgres.statement.timeout",
            ValueParsers.format(PostgresWriterOptions.DEFAULT_STATEMENT_TIMEOUT),
            "Longest statement of the sink (PostgreSQL statement_timeout; 1ms..24d), effect calls"
                    + " included."),
    POSTGRES_EFFECT_FUNCTION(
            "postgres.effect.function",
            Presence.OPTIONAL,
            "SQL function name(message_id text, payload jsonb) RETURNS jsonb, as function or"
                    + " schema.function, called once per new message id, its changes committed with"
                    + " the result it stores in the id's row (docs/effects.md);"
                    + " default: none."),
    POSTGRES_EFFECT_KEYS(
            "postgres.effect.keys",
            Presence.OPTIONAL,
            "SQL function name(message_id text, payload jsonb) RETURNS text[] naming what an effect"
                    + " changes (e.g. its accounts): effects lock these keys, in one global order, before"
                    + " the effect function runs, so effects on other keys run in parallel and two never"
                    + " deadlock (docs/effects.md); default: none, effects lock only their own rows."),
    POSTGRES_EFFECT_RESULTS_TOPIC(
            "postgres.effect.results.topic",
            Presence.OPTIONAL,
            "Kafka topic (it must exist) that receives each effect's outcome (applied, rejected or failed,"
                    + " with its result) exactly once, per source partition in the order decided, for"
                    + " read_committed consumers (docs/effects.md, \"Outcomes in Kafka\"); needs"
                    + " postgres.effect.function; default: none."),
    POSTGRES_ALLOW_TRIGGERS_THAT_MAY_STALL_CHECKPOINTS(
            "postgres.allow.triggers.that.may.stall.checkpoints",
            "false",
            "true or false: whether a start accepts your triggers on the events, rejects and commit log"
                    + " tables (and the effect queue). A checkpoint's prepared transaction keeps every row lock"
                    + " its triggers took until the checkpoint completes, so a trigger that updates a row other"
                    + " subtasks' rows update too (a counter, a summary) makes them wait for a checkpoint that"
                    + " waits for them: it stalls, and restarts into the same wait after postgres.lock.timeout."
                    + " Only a trigger that locks rows of its own message id is safe (docs/postgres.md)."),
    POSTGRES_ACCEPT_COMMIT_LOSS_ON_FAILOVER(
            "postgres.accept.commit.loss.on.failover",
            "false",
            "true or false: whether the start check accepts a PostgreSQL server that streams to replicas"
                    + " its commits do not wait for (asynchronous, or synchronous_commit = local): a failover to"
                    + " one that is behind can lose acknowledged commits and prepared transactions of completed"
                    + " checkpoints (docs/failover.md); by default such a server is refused.");

    /** Prefix of keys passed unchecked to the Kafka clients. */
    static final String KAFKA_PROPERTIES_PREFIX = "kafka.properties.";

    private static final Map<String, ConfigKey> BY_KEY =
            Arrays.stream(values()).collect(Collectors.toMap(ConfigKey::key, Function.identity()));

    /** Whether a key without a default must be given. */
    private enum Presence {
        REQUIRED,
        OPTIONAL
    }

    private final String key;
    private final boolean required;
    private final String defaultValue;
    private final String description;

    ConfigKey(String key, Presence presence, String description) {
        this(key, presence == Presence.REQUIRED, null, description);
    }

    ConfigKey(String key, String defaultValue, String description) {
        this(key, false, defaultValue, description);
    }

    ConfigKey(String key, boolean required, String defaultValue, String description) {
        this.key = key;
        this.required = required;
        this.defaultValue = defaultValue;
        this.description = description;
    }

    /** The key as written in arguments and properties files. */
    String key() {
        return key;
    }

    boolean required() {
        return required;
    }

    /** The default value, or null if the key is required or optional without default. */
    String defaultValue() {
        return defaultValue;
    }

    /** One sentence, ending with a period. */
    String description() {
        return description;
    }

    /** Tells whether {@code key} is a known key or a Kafka client pass-through key. */
    static boolean isValidKey(String key) {
        return BY_KEY.containsKey(key)
                || key.startsWith(KAFKA_PROPERTIES_PREFIX)
                        && key.length() > KAFKA_PROPERTIES_PREFIX.length();
    }

    /**
     * Guesses which known key an unknown one was meant to be: the only key ending with {@code
     * "." + unknownKey} (e.g. {@code group.id}), else the key with the fewest typing differences
     * if there are few enough to be a typo.
     */
    static Optional<ConfigKey> closestTo(String unknownKey) {
        String typed = unknownKey.toLowerCase(Locale.ROOT);
        List<ConfigKey> endingWithIt =
                Arrays.stream(values()).filter(known -> known.key.endsWith("." + typed)).toList();
        if (endingWithIt.size() == 1) {
            return Optional.of(endingWithIt.get(0));
        }
        int tolerance = Math.max(2, typed.length() / 4);
        return Arrays.stream(values())
                .min(comparingInt(known -> editDistance(typed, known.key)))
                .filter(closest -> editDistance(typed, closest.key) <= tolerance);
    }

    /** Levenshtein distance: the fewest single-character edits turning one into the other. */
    private static int editDistance(String from, String to) {
        int[] previousRow = new int[to.length() + 1];
        int[] currentRow = new int[to.length() + 1];
        for (int j = 0; j <= to.length(); j++) {
            previousRow[j] = j;
        }
        for (int i = 1; i <= from.length(); i++) {
            currentRow[0] = i;
            for (int j = 1; j <= to.length(); j++) {
                int substitution = from.charAt(i - 1) == to.charAt(j - 1) ? 0 : 1;
                currentRow[j] =
                        Math.min(
                                previousRow[j - 1] + substitution,
                                Math.min(previousRow[j], currentRow[j - 1]) + 1);
            }
            int[] swap = previousRow;
            previousRow = currentRow;
            currentRow = swap;
        }
        return previousRow[to.length()];
    }
}
