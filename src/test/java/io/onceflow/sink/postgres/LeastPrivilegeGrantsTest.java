package io.onceflow.sink.postgres;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.api.Event;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.PostgresCommittable;
import io.onceflow.sink.postgres.internal.PostgresExactlyOnceWriter;
import io.onceflow.testing.DocumentedGrants;
import io.onceflow.testing.RecordingCommitRequest;
import io.onceflow.testing.RecordingCommitRequest.Outcome;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The grants docs/deploy.md gives the job's role, run as written ({@link DocumentedGrants}): that role
 * starts an exactly-once sink and writes, prepares and commits a checkpoint with a refused row and an
 * effect call, as the job does, on tables and a function another role owns.
 */
class LeastPrivilegeGrantsTest {
    private final SinkDatabase db = new SinkDatabase();

    @Test
    void theDocumentedGrantsAreEnoughForAnExactlyOnceCheckpointWithARefusedRowAndAnEffect() throws Exception {
        String job = DocumentedGrants.apply(db.database);

        PostgresSinkConfig config = SinkDatabase.config(db.builderAs("grants", job)
                .setEffectFunction(DocumentedGrants.EFFECT));
        PostgresExactlyOnceWriter writer = db.freshWriter(config);
        PostgresCommittable committable = PostgresTwoPhaseCommitTest.checkpoint(writer, 1,
                SinkDatabase.event("a"), SinkDatabase.event("b"), refused("c"));
        List<RecordingCommitRequest<PostgresCommittable>> requests =
                PostgresTwoPhaseCommitTest.commit(config, committable);
        writer.close();
        SinkDatabase.drainEffects(config, PostgresSinkMetrics.unregistered()); // as the job's role

        assertThat(requests).extracting(request -> request.outcome).containsExactly(Outcome.COMMITTED);
        assertThat(db.deliveriesById()).containsOnlyKeys("a", "b");
        assertThat(db.rejects()).containsOnlyKeys("c");
        List<String> results = new ArrayList<>();
        db.query("SELECT result->>'status' FROM " + SinkDatabase.TABLE, row -> results.add(row.getString(1)));
        assertThat(results).containsExactly("applied", "applied");
    }

    /** Refused by the owner's CHECK constraint: the row goes to the rejects table. */
    private static Event refused(String id) {
        byte[] payload = ("{\"id\":\"" + id + "\",\"refuse\":true}").getBytes(StandardCharsets.UTF_8);
        return new Event(id, payload, "input", 0, 7, 0L, new HashMap<>());
    }
}
