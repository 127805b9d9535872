package io.onceflow.sink.postgres.internal;

import io.onceflow.sink.postgres.options.SqlIdentifiers;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.apache.flink.annotation.Internal;
import org.postgresql.jdbc.PgConnection;

/**
 * Internal. Locks what a batch of effects touches, as the user's keys function declares it ({@code
 * postgres.effect.keys}: {@code fn(message_id text, payload jsonb) RETURNS text[]}, e.g. both
 * accounts of a transfer): one transaction-scoped advisory lock per distinct key, all taken in one
 * statement in ascending order before the effect function runs.
 *
 * <p>Why: two effect transactions that change the same rows in different orders deadlock (a
 * transfer A to B against one from B to A). Locks taken in one global order cannot form a cycle,
 * and a lock per key (not per table) lets effects on other keys run at the same time, so effects
 * scale with the number of workers. (Taking only the keys that are free, without waiting, and
 * leaving the other messages for a later batch measured no faster: 6,455 against 6,593 records/s
 * in the benchmark's keyed ledger effect, one run each.) The locks go with the transaction, which is never held across a
 * checkpoint barrier.
 *
 * <p>A key is locked by its 32-bit hash in the {@code bigint} space of advisory locks, under a
 * fixed high word: a hash collision only makes two effects wait for each other, and the fence's
 * locks (the two-{@code int} space) and the schema lock (another high word) are never hit.
 */
@Internal
final class EffectKeys {
    /** The high 32 bits of every key's lock: "onc" and 0x1. */
    static final long KEY_SPACE = 0x6f6e6301L << 32;
    /**
     * Most keys one transaction locks. Advisory locks take slots of PostgreSQL's shared lock table
     * (max_locks_per_transaction x (max_connections + max_prepared_transactions), about 6,400 by
     * default), which every session shares: a batch of 1,000 transfers would take 2,000 and, with a
     * few workers, leave none for the writers and committers. A batch stops at the message whose
     * keys would pass this; a message with more keys than this fails (54000).
     */
    static final int MAX_KEYS_PER_TRANSACTION = 256;

    private final String keysSql;
    private final String lockSql;

    private final String keysFunction;

    public EffectKeys(EventsTable events, String keysFunction) {
        SqlIdentifiers.requireFunctionName("effect keys function", keysFunction);
        this.keysFunction = keysFunction;
        this.keysSql = "SELECT n.id, hashtext(k) FROM unnest(?::text[]) AS n(id) JOIN " + events.name()
                + " e ON e.id = n.id, unnest(" + keysFunction + "(e.id, e.payload)) AS k WHERE k IS NOT NULL";
        // the volatile lock calls stay in the subquery's target list, evaluated row by row in its order
        this.lockSql = "SELECT count(*) FROM (SELECT pg_advisory_xact_lock(k) FROM (SELECT k FROM"
                + " unnest(?::bigint[]) WITH ORDINALITY AS t(k, position) ORDER BY position) ordered) locked";
    }

    /**
     * The hashes of the keys of the events row in {@code alias} as an {@code int[]} ({@link
     * #keysOf(Array)} reads it): for the statement that takes a batch, which reads the events rows
     * anyway, so that the keys cost no second pass over them.
     */
    public String hashesColumn(String alias) {
        return "(SELECT array_agg(hashtext(k)) FROM unnest(" + keysFunction + "(" + alias + ".id, " + alias
                + ".payload)) AS k WHERE k IS NOT NULL)";
    }

    /** The keys of a {@link #hashesColumn}. */
    static Set<Long> keysOf(Array hashes) throws SQLException {
        Set<Long> keys = new HashSet<>();
        if (hashes != null) {
            for (Object hash : (Object[]) hashes.getArray()) {
                keys.add(KEY_SPACE | (((Integer) hash) & 0xffffffffL));
            }
        }
        return keys;
    }

    /**
     * Locks the keys of {@code rows}' messages in ascending order, for as many messages, in their
     * order, as {@link #MAX_KEYS_PER_TRANSACTION} allows. A message whose keys function raises an error about its data, or that has more
     * keys than that, is recorded failed in {@code outcomes}.
     *
     * @return the rows whose keys are locked, in their order (a prefix of {@code rows}, less
     *     failures); the others stay queued
     */
    Rows lock(Connection connection, Rows rows, EffectOutcomes outcomes) throws SQLException {
        Map<String, Set<Long>> keysById = new HashMap<>();
        Set<String> failed = new HashSet<>();
        RowIsolation.isolatingFailingRows(connection, rows, (c, some) -> keysById.putAll(keysOf(c, some)),
                SqlStates::isAboutTheMessage, (c, row, failure) -> {
                    outcomes.failure(row.ids[0], failure);
                    failed.add(row.ids[0]);
                });
        return lock(connection, rows.select(id -> !failed.contains(id)), keysById, outcomes);
    }

    /** As {@link #lock(Connection, Rows, EffectOutcomes)}, with the keys known already (none for an id without). */
    Rows lock(Connection connection, Rows rows, Map<String, Set<Long>> keysById, EffectOutcomes outcomes)
            throws SQLException {
        List<String> candidates = new ArrayList<>();
        Set<Long> wanted = new HashSet<>();
        for (String id : rows.ids) {
            Set<Long> keys = keysById.getOrDefault(id, Set.of());
            if (keys.size() > MAX_KEYS_PER_TRANSACTION) {
                outcomes.failure(id, "54000", "the effect keys function returned " + keys.size() + " keys for this"
                        + " message; at most " + MAX_KEYS_PER_TRANSACTION + " are locked in one transaction");
                continue;
            }
            Set<Long> more = new HashSet<>(keys);
            more.removeAll(wanted);
            if (wanted.size() + more.size() > MAX_KEYS_PER_TRANSACTION) {
                break; // the rest wait for the next batch, in order
            }
            wanted.addAll(more);
            candidates.add(id);
        }
        if (!wanted.isEmpty()) {
            try (PreparedStatement lock = connection.prepareStatement(lockSql)) {
                lock.setArray(1, connection.unwrap(PgConnection.class).createArrayOf("int8",
                        new TreeSet<>(wanted).toArray()));
                lock.executeQuery().close();
            }
        }
        Set<String> taken = new HashSet<>(candidates);
        return rows.select(taken::contains);
    }

    private Map<String, Set<Long>> keysOf(Connection connection, Rows rows) throws SQLException {
        Map<String, Set<Long>> keys = new HashMap<>();
        try (PreparedStatement query = connection.prepareStatement(keysSql)) {
            query.setArray(1, connection.unwrap(PgConnection.class).createArrayOf("text", rows.ids));
            try (ResultSet hashes = query.executeQuery()) {
                while (hashes.next()) {
                    keys.computeIfAbsent(hashes.getString(1), id -> new HashSet<>())
                            .add(KEY_SPACE | (hashes.getInt(2) & 0xffffffffL));
                }
            }
        }
        return keys;
    }
}
