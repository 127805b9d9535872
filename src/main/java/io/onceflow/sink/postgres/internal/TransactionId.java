package io.onceflow.sink.postgres.internal;

import org.apache.flink.annotation.Internal;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The identity of one PostgreSQL prepared transaction of the sink, and its global transaction id
 * (gid) as PostgreSQL shows it in {@code pg_prepared_xacts}:
 *
 * <pre>onceflow:&lt;sinkPrefix&gt;:e&lt;epoch&gt;:s&lt;subtaskIndex&gt;:c&lt;checkpointId&gt;</pre>
 *
 * <p>for example {@code onceflow:orders_pg:e7731:s0:c42}.
 *
 * <ul>
 *   <li>{@code sinkPrefix} ({@code [a-zA-Z0-9_]{1,40}}) names the sink; it must be unique among the
 *       jobs writing to one database, because recovery rolls back the prefix's transactions.
 *   <li>{@code epoch} is issued once per writer start by PostgreSQL itself (the 64-bit transaction
 *       id of the writer's start-up transaction, which the server never issues twice), so gids stay
 *       unique across failover restarts, resubmissions from one savepoint and fresh starts, where
 *       checkpoint ids begin at 1 again.
 *   <li>{@code subtaskIndex} is the writer subtask that prepared the transaction.
 *   <li>{@code checkpointId} is the checkpoint the transaction belongs to (never greater than it, and
 *       greater than every checkpoint the subtask took part in before). Recovery compares it with the restored checkpoint.
 * </ul>
 *
 * <p>The separator {@code ':'} cannot occur in a prefix, so the prefix {@code job} never matches the
 * gids of the prefix {@code job2}.
 */
@Internal
public record TransactionId(String sinkPrefix, long epoch, int subtaskIndex, long checkpointId) {
    /** What a sink prefix may look like: it goes into gids (at most 200 bytes in PostgreSQL). */
    public static final Pattern SINK_PREFIX = Pattern.compile("[a-zA-Z0-9_]{1,40}");

    private static final String NAMESPACE = "onceflow";
    private static final Pattern GID = Pattern.compile(
            NAMESPACE + ":(" + SINK_PREFIX.pattern() + "):e([0-9]{1,19}):s([0-9]{1,10}):c([0-9]{1,19})");

    /**
     * @throws IllegalArgumentException if the prefix does not match {@link #SINK_PREFIX} or a
     *     number is negative
     */
    public TransactionId {
        if (sinkPrefix == null || !SINK_PREFIX.matcher(sinkPrefix).matches()) {
            throw new IllegalArgumentException("sink prefix '" + sinkPrefix + "' does not match " + SINK_PREFIX);
        }
        if (epoch < 0 || subtaskIndex < 0 || checkpointId < 0) {
            throw new IllegalArgumentException("epoch, subtask index and checkpoint id must not be negative: "
                    + epoch + ", " + subtaskIndex + ", " + checkpointId);
        }
    }

    /**
     * Parses any onceflow gid.
     *
     * @return empty for anything else (another application's gid, a malformed or non-canonical
     *     one, null); never throws
     */
    public static Optional<TransactionId> parse(String gid) {
        if (gid == null) {
            return Optional.empty();
        }
        Matcher matcher = GID.matcher(gid);
        if (!matcher.matches()) {
            return Optional.empty();
        }
        try {
            TransactionId id = new TransactionId(matcher.group(1), Long.parseLong(matcher.group(2)),
                    Integer.parseInt(matcher.group(3)), Long.parseLong(matcher.group(4)));
            // Only the canonical spelling (no leading zeros) is ours: one transaction, one gid.
            return id.encode().equals(gid) ? Optional.of(id) : Optional.empty();
        } catch (NumberFormatException tooLarge) {
            return Optional.empty();
        }
    }

    /**
     * Parses a gid of one sink.
     *
     * @return empty unless {@code gid} is a onceflow gid with exactly this prefix
     */
    public static Optional<TransactionId> parse(String gid, String sinkPrefix) {
        return parse(gid).filter(id -> id.sinkPrefix.equals(sinkPrefix));
    }

    /** What every gid of {@code sinkPrefix} starts with, and no gid of another prefix. */
    public static String gidPrefix(String sinkPrefix) {
        return NAMESPACE + ":" + sinkPrefix + ":";
    }

    /** The gid to use in {@code PREPARE TRANSACTION} and {@code COMMIT PREPARED}. */
    public String encode() {
        return gidPrefix(sinkPrefix) + "e" + epoch + ":s" + subtaskIndex + ":c" + checkpointId;
    }

    /** The gid. */
    @Override
    public String toString() {
        return encode();
    }
}
