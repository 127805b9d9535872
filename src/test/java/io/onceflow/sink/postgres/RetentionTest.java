package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.options.PostgresTableOptions;
import static io.onceflow.sink.postgres.PostgresTwoPhaseCommitTest.checkpoint;
import static io.onceflow.sink.postgres.PostgresTwoPhaseCommitTest.commit;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.onceflow.config.ConfigException;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresCommittable;
import io.onceflow.sink.postgres.internal.PostgresExactlyOnceWriter;
import io.onceflow.testing.RecordingCommitRequest.Outcome;
import io.onceflow.tools.retention.Retention;
import io.onceflow.tools.retention.Retention.Purged;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * {@link Retention} against a real PostgreSQL server: old rows go, recent rows and pending effects
 * stay, a window shorter than dedup.ttl is refused, and a checkpoint younger than the window still
 * commits after the purge. Rows are aged by moving their timestamps back.
 */
class RetentionTest {
    private static final Duration DEDUP_TTL = Duration.ofDays(7);
    private static final Duration KEEP = Duration.ofDays(14);
    /** Small, so that a purge takes several batches. */
    private static final int BATCH_SIZE = 2;

    private final SinkDatabase db = new SinkDatabase();
    private final PostgresSinkConfig config = db.config("job");
    private final Retention retention = new Retention(config.connection(), config.tables(), config.writer(), "job", DEDUP_TTL);

    @Test
    void oldRowsGoRecentRowsAndPendingEffectsStay() throws Exception {
        try (PostgresExactlyOnceWriter writer = db.freshWriter(config)) {
            commit(config, checkpoint(writer, 1, "old1", "old2", "old3", "old4", "old5", "pending", "recent"));
        }
        age("UPDATE " + SinkDatabase.TABLE + " SET first_processed_at = now() - interval '15 days'"
                + " WHERE id <> 'recent'");
        // as the sink leaves a row whose effect no worker has applied yet
        db.execute("INSERT INTO " + SinkDatabase.TABLE + "_effect_queue (id) VALUES ('pending')");

        Purged purged = retention.purge(KEEP, BATCH_SIZE);

        assertThat(db.deliveriesById()).containsOnlyKeys("pending", "recent");
        assertThat(purged.events()).isEqualTo(5);
        assertThat(purged.pendingEffectsKept()).isEqualTo(1);
        assertThat(purged.toText()).contains("5 rows deleted, 1 older rows kept (effect pending or failed)");
    }

    @Test
    void aFailedEffectStaysAndARowWhoseEffectWasDroppedByHandGoes() throws Exception {
        try (PostgresExactlyOnceWriter writer = db.freshWriter(config)) {
            commit(config, checkpoint(writer, 1, "failed", "dropped", "rejected"));
        }
        age("UPDATE " + SinkDatabase.TABLE + " SET first_processed_at = now() - interval '15 days',"
                + " effect_transaction = 'job-1', result = '{\"status\":\"rejected\"}'");
        // a failure waits for an operator in the queue, marked failed
        age("UPDATE " + SinkDatabase.TABLE + " SET result = '{\"status\":\"failed\"}' WHERE id = 'failed'");
        db.execute("INSERT INTO " + SinkDatabase.TABLE + "_effect_queue (id, failed_at) VALUES ('failed', now())");
        // an effect dropped on purpose (DELETE FROM the queue, as docs/effects.md says): no result, no queue row
        age("UPDATE " + SinkDatabase.TABLE + " SET result = NULL WHERE id = 'dropped'");

        Purged purged = retention.purge(KEEP, BATCH_SIZE);

        assertThat(db.deliveriesById()).containsOnlyKeys("failed");
        assertThat(purged.events()).isEqualTo(2);
        assertThat(purged.pendingEffectsKept()).isEqualTo(1);
    }

    @Test
    void aWindowShorterThanTheDedupTtlIsRefusedAndDeletesNothing() throws Exception {
        try (PostgresExactlyOnceWriter writer = db.freshWriter(config)) {
            commit(config, checkpoint(writer, 1, "a"));
        }
        age("UPDATE " + SinkDatabase.TABLE + " SET first_processed_at = now() - interval '15 days'");

        assertThatThrownBy(() -> retention.purge(Duration.ofDays(6), BATCH_SIZE))
                .isInstanceOf(ConfigException.class)
                .hasMessageContaining("--keep: is 6d, shorter than dedup.ttl (7d)")
                .hasMessageContaining("Keep rows at least as long as dedup.ttl");
        assertThat(db.deliveriesById()).containsOnlyKeys("a");
    }

    @Test
    void aCheckpointYoungerThanThePurgedLogStillCommitsAndTheOlderOnesAreGone() throws Exception {
        List<PostgresCommittable> checkpoints = new ArrayList<>();
        try (PostgresExactlyOnceWriter writer = db.freshWriter(config)) {
            for (long id = 1; id <= 4; id++) {
                checkpoints.add(checkpoint(writer, id, "c" + id));
            }
        }
        commit(config, checkpoints.get(0), checkpoints.get(1), checkpoints.get(2)); // 4 stays prepared
        // checkpoints 1 and 2 were taken 20 days ago; 3 and 4 (the one a restore would use) are recent
        age("UPDATE " + PostgresTableOptions.DEFAULT_COMMIT_LOG + " SET committed_at = now() - interval '20 days'"
                + " WHERE gid IN ('" + checkpoints.get(0).transactionId() + "', '"
                + checkpoints.get(1).transactionId() + "')");
        // another sink's row in the same log is not this purge's
        db.execute("INSERT INTO " + PostgresTableOptions.DEFAULT_COMMIT_LOG + " VALUES ('onceflow:other:e1:s0:c1',"
                + " now() - interval '20 days')");

        Purged purged = retention.purge(KEEP, BATCH_SIZE);

        assertThat(purged.commitLog()).isEqualTo(2);
        // checkpoint 4's row is inside its prepared transaction, out of the purge's sight
        assertThat(logged()).containsExactlyInAnyOrder("onceflow:other:e1:s0:c1",
                checkpoints.get(2).transactionId().encode());
        // a restore of checkpoint 4 replays the committables of 3 (committed) and 4 (prepared)
        assertThat(commit(config, checkpoints.get(2), checkpoints.get(3))).extracting(r -> r.outcome)
                .containsExactly(Outcome.ALREADY_COMMITTED, Outcome.COMMITTED);
        assertThat(db.deliveriesById()).containsOnlyKeys("c1", "c2", "c3", "c4");
        // what the window protects: a restore of a checkpoint older than it finds its row purged
        assertThat(commit(config, checkpoints.get(1)).get(0).failure)
                .hasMessageContaining("LOST: prepared transaction " + checkpoints.get(1).transactionId());
    }

    private void age(String update) throws Exception {
        db.execute(update);
    }

    private List<String> logged() throws Exception {
        List<String> gids = new ArrayList<>();
        db.query("SELECT gid FROM " + PostgresTableOptions.DEFAULT_COMMIT_LOG, row -> gids.add(row.getString(1)));
        return gids;
    }
}
