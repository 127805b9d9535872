package io.onceflow.sink.postgres.internal;

import org.apache.flink.annotation.Internal;

/**
 * Internal. The outbox of effect outcomes for a results topic: one row per outcome an effect
 * transaction decided (applied, rejected or failed; a re-driven effect's second outcome is a second
 * row), numbered per sink and source partition by {@code seq} in the order they were decided.
 * Written in the effect's own transaction ({@link #recordStatement}), so an outcome is recorded
 * exactly when the effect commits. Named {@code <events>}{@value #SUFFIX} (shorter than the queue's
 * suffix, so any events name that leaves room for the queue leaves room for it).
 *
 * <p>The numbering needs no counter of its own: a batch takes one partition's effects only while it
 * holds the partition's transaction lock, so the batches of a partition commit one after another,
 * each numbering after the highest {@code seq} the one before committed. A reader therefore sees a
 * partition's outcomes in {@code seq} order, never a later one without the earlier. The relay
 * deletes what it published except each partition's last row, which it marks {@code published}: it
 * carries the numbering on, and is the floor of the relay's cursor.
 */
@Internal
public final class EffectOutcomesTable {
    static final String SUFFIX = "_outcomes";

    private final String name;
    private final String events;

    /** @param events the events table's validated name, {@code table} or {@code schema.table} */
    EffectOutcomesTable(String events) {
        this.events = events;
        this.name = events + SUFFIX;
    }

    public String name() {
        return name;
    }

    /** {@code CREATE TABLE IF NOT EXISTS}. */
    public String createStatement() {
        return "CREATE TABLE IF NOT EXISTS " + name + " (\n"
                + "    sink_prefix text NOT NULL,\n"
                + "    source_topic text NOT NULL,\n"
                + "    source_partition int NOT NULL,\n"
                + "    seq bigint NOT NULL,\n"
                + "    id text NOT NULL,\n"
                + "    source_offset bigint NOT NULL,\n"
                + "    result jsonb NOT NULL,\n"
                + "    decided_at timestamptz NOT NULL DEFAULT clock_timestamp(),\n"
                + "    published boolean NOT NULL DEFAULT false,\n"
                + "    PRIMARY KEY (sink_prefix, source_topic, source_partition, seq)\n"
                + ")";
    }

    /**
     * Records, in the effect transaction that stored them, the outcomes of the ids in parameter 1 for
     * the sink in parameter 2: numbered per source partition in offset order after the partition's
     * highest {@code seq}. The caller holds the partitions' locks. Rows of an earlier version without
     * a source partition have nothing to be numbered by and are left out.
     */
    public String recordStatement() {
        return "INSERT INTO " + name + " (sink_prefix, source_topic, source_partition, seq, id, source_offset, result)"
                + " SELECT s.prefix, e.source_topic, e.source_partition, coalesce((SELECT max(o.seq) FROM " + name + " o"
                + " WHERE o.sink_prefix = s.prefix AND o.source_topic = e.source_topic"
                + " AND o.source_partition = e.source_partition), 0)"
                + " + row_number() OVER (PARTITION BY e.source_topic, e.source_partition ORDER BY e.source_offset, e.id),"
                + " e.id, e.source_offset, e.result FROM " + events + " e CROSS JOIN (SELECT ?::text) AS s(prefix)"
                + " WHERE e.id = ANY (?::text[]) AND e.source_topic IS NOT NULL AND e.source_partition IS NOT NULL"
                + " AND e.source_offset IS NOT NULL AND e.result IS NOT NULL";
    }

    /** The source partitions of the sink in parameter 1 that have outcomes, and each one's highest {@code seq}. */
    public String headsQuery() {
        return "SELECT source_topic, source_partition, max(seq) FROM " + name + " WHERE sink_prefix = ?"
                + " GROUP BY source_topic, source_partition";
    }

    /**
     * Up to parameter 5 outcomes of sink 1, topic 2, partition 3 from {@code seq} 4 on, in {@code seq}
     * order: seq, id, the results topic's record value ({@code {"id", "status" (applied, rejected,
     * failed), "result", "topic", "partition", "offset", "seq", "decided_at"}} as JSON text), the status
     * and the source offset.
     */
    public String readQuery() {
        String status = "CASE WHEN result->>'status' IN ('" + EffectFunction.REJECTED + "', '" + EffectFunction.FAILED
                + "') THEN result->>'status' ELSE 'applied' END";
        return "SELECT seq, id, jsonb_build_object('id', id, 'status', " + status + ", 'result', result, 'topic',"
                + " source_topic, 'partition', source_partition, 'offset', source_offset, 'seq', seq, 'decided_at',"
                + " decided_at)::text, " + status + ", source_offset FROM " + name
                + " WHERE sink_prefix = ? AND source_topic = ? AND source_partition = ? AND seq >= ?"
                + " ORDER BY seq LIMIT ?";
    }

    /**
     * The floor of the cursor of sink 1, topic 2, partition 3: after the last outcome marked published,
     * 0 if none.
     */
    public String floorQuery() {
        return "SELECT coalesce(max(seq) + 1, 0) FROM " + name
                + " WHERE sink_prefix = ? AND source_topic = ? AND source_partition = ? AND published";
    }

    /**
     * After outcomes up to {@code seq} 4 of sink 1, topic 2, partition 3 were published: marks that
     * last one published (the cursor's floor, and what carries the numbering on) and deletes those
     * before it.
     */
    public String markPublishedStatement() {
        return "WITH p AS (SELECT ?::text AS prefix, ?::text AS topic, ?::int AS part, ?::bigint AS last),"
                + " marked AS (UPDATE " + name + " o SET published = true FROM p WHERE o.sink_prefix = p.prefix"
                + " AND o.source_topic = p.topic AND o.source_partition = p.part AND o.seq = p.last)"
                + " DELETE FROM " + name + " o USING p WHERE o.sink_prefix = p.prefix AND o.source_topic = p.topic"
                + " AND o.source_partition = p.part AND o.seq < p.last";
    }
}
