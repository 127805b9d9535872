package io.onceflow.sink.postgres;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.api.Event;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The keys function of effects ({@code postgres.effect.keys}) against a real server: computed as a
 * batch takes its effects, bounded per transaction, and a message it fails on fails alone.
 */
class EffectKeysTest {
    private final SinkDatabase db = new SinkDatabase();

    @Test
    void aTransactionLocksAtMostItsKeyBudgetAndAMessageWithMoreKeysFails() throws Exception {
        db.execute("CREATE SCHEMA IF NOT EXISTS ledger");
        db.execute("CREATE FUNCTION ledger.many_keys(message_id text, payload jsonb) RETURNS text[] LANGUAGE sql"
                + " AS $$ SELECT array_agg(message_id || '-' || n) FROM generate_series(1, (payload->>'keys')::int) n $$");
        db.execute("CREATE FUNCTION ledger.count_keys(message_id text, payload jsonb) RETURNS jsonb LANGUAGE sql"
                + " AS $$ SELECT jsonb_build_object('status', 'applied', 'locks', (SELECT count(*) FROM pg_locks"
                + " WHERE locktype = 'advisory' AND pid = pg_backend_pid())) $$");
        PostgresSinkConfig config = db.config(db.builder("ledger").setEffectFunction("ledger.count_keys")
                .setEffectKeys("ledger.many_keys"));
        Event[] events = new Event[12];
        for (int i = 0; i < events.length; i++) {
            events[i] = BusinessEffectsTest.event("m" + i, "{\"keys\":" + (i == 5 ? 300 : 100) + "}");
        }
        db.commitFreshCheckpoint(config, events);
        SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered());

        Map<String, Long> locks = new HashMap<>();
        db.query("SELECT id, (result->>'locks')::bigint FROM " + SinkDatabase.TABLE + " WHERE id <> 'm5'",
                row -> locks.put(row.getString(1), row.getLong(2)));
        assertThat(locks).hasSize(11).allSatisfy((id, held) -> assertThat(held).as(id).isBetween(100L, 256L));
        assertThat(db.effectStatuses()).containsEntry("m5", "failed");
    }

    /**
     * The keys are computed in the statement that takes the batch; a keys function that raises on
     * one message's data fails that statement for the whole batch. The message is recorded failed,
     * the others are applied once each, in offset order.
     */
    @Test
    void aKeysFunctionThatFailsOnOneMessageFailsThatMessageOnly() throws Exception {
        db.execute("CREATE SCHEMA IF NOT EXISTS ledger");
        db.execute("CREATE TABLE ledger.calls (seq bigserial PRIMARY KEY, id text NOT NULL)");
        db.execute("CREATE FUNCTION ledger.strict_keys(message_id text, payload jsonb) RETURNS text[] LANGUAGE plpgsql"
                + " AS $$ BEGIN IF payload ? 'bad' THEN RAISE EXCEPTION 'no account in %', message_id; END IF;"
                + " RETURN ARRAY[payload->>'account']; END $$");
        db.execute("CREATE FUNCTION ledger.record_call(message_id text, payload jsonb) RETURNS jsonb LANGUAGE plpgsql"
                + " AS $$ BEGIN INSERT INTO ledger.calls (id) VALUES (message_id);"
                + " RETURN jsonb_build_object('status', 'applied'); END $$");
        PostgresSinkConfig config = db.config(db.builder("ledger").setEffectFunction("ledger.record_call")
                .setEffectKeys("ledger.strict_keys"));
        List<Event> events = new ArrayList<>();
        List<String> expected = new ArrayList<>();
        for (int i = 0; i < 20; i++) {
            events.add(BusinessEffectsTest.event("m" + i, i == 7 ? "{\"bad\":true}" : "{\"account\":\"a" + i % 3 + "\"}"));
            if (i != 7) {
                expected.add("m" + i);
            }
        }
        db.commitFreshCheckpoint(config, events.toArray(Event[]::new));

        SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered());

        assertThat(db.database.rows("SELECT id FROM ledger.calls ORDER BY seq")).containsExactlyElementsOf(expected);
        Map<String, String> statuses = new HashMap<>(db.effectStatuses());
        assertThat(statuses).containsEntry("m7", "failed").hasSize(20);
        statuses.remove("m7");
        assertThat(statuses).allSatisfy((id, status) -> assertThat(status).as(id).isEqualTo("applied"));
    }

    /**
     * What a keys function may return besides a plain list, as the take computes it: NULL and an
     * empty array lock no key, NULL elements are skipped, duplicates are one key. Each message in a
     * batch of its own, its effect counts the key locks it runs under (the partition's lock, of two
     * int keys, aside). (From the review of the keys computed in the take: as the keys statement did.)
     */
    @Test
    void nullEmptyNullElementsAndDuplicateKeysLockWhatTheyName() throws Exception {
        db.execute("CREATE SCHEMA IF NOT EXISTS ledger");
        db.execute("CREATE FUNCTION ledger.odd_keys(message_id text, payload jsonb) RETURNS text[] LANGUAGE sql"
                + " AS $$ SELECT CASE WHEN payload->'keys' = 'null' THEN NULL"
                + " ELSE ARRAY(SELECT jsonb_array_elements_text(payload->'keys')) END $$");
        db.execute("CREATE FUNCTION ledger.count_key_locks(message_id text, payload jsonb) RETURNS jsonb LANGUAGE sql"
                + " AS $$ SELECT jsonb_build_object('status', 'applied', 'locks', (SELECT count(*) FROM pg_locks"
                + " WHERE locktype = 'advisory' AND objsubid = 1 AND pid = pg_backend_pid())) $$");
        PostgresSinkConfig config = db.config(db.builder("ledger").setEffectFunction("ledger.count_key_locks")
                .setEffectKeys("ledger.odd_keys").setBatchSize(1));
        db.commitFreshCheckpoint(config, BusinessEffectsTest.event("null", "{\"keys\":null}"),
                BusinessEffectsTest.event("empty", "{\"keys\":[]}"),
                BusinessEffectsTest.event("null-element", "{\"keys\":[null,\"a\"]}"),
                BusinessEffectsTest.event("duplicates", "{\"keys\":[\"a\",\"b\",\"a\"]}"));
        SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered());

        Map<String, Long> locks = new HashMap<>();
        db.query("SELECT id, (result->>'locks')::bigint FROM " + SinkDatabase.TABLE,
                row -> locks.put(row.getString(1), row.getLong(2)));
        assertThat(locks).containsExactlyInAnyOrderEntriesOf(
                Map.of("null", 0L, "empty", 0L, "null-element", 1L, "duplicates", 2L));
    }
}
