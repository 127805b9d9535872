package io.onceflow.sink.postgres;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresExactlyOnceWriter;
import io.onceflow.testing.DocumentedGrants;
import io.onceflow.testing.RecordingCommitRequest.Outcome;
import org.junit.jupiter.api.Test;

/**
 * The server identity a run records ({@code system_identifier}, timeline) as the job's least-privilege
 * role reads it, and a start that cannot read it: it records nothing and goes on (the change of
 * server then goes unseen, which the writers warn about).
 */
class ServerIdentityTest {
    private final SinkDatabase db = new SinkDatabase();

    @Test
    void theDocumentedRoleRecordsTheServersIdentity() throws Exception {
        String job = DocumentedGrants.apply(db.database);

        PostgresSinkConfig config = SinkDatabase.config(db.builderAs("identity", job));

        assertThat(db.database.rows("SELECT r.system_identifier = c.system_identifier, r.timeline_id FROM"
                + " onceflow_runs r, pg_control_system() c WHERE r.run = " + config.run())).containsExactly("t 1");
    }

    @Test
    void withoutThePrivilegeARunRecordsNoIdentityAndTheSinkWorks() throws Exception {
        String job = DocumentedGrants.apply(db.database);
        // in this database only: pg_proc is per database
        db.execute("REVOKE EXECUTE ON FUNCTION pg_control_system() FROM PUBLIC");
        db.execute("REVOKE EXECUTE ON FUNCTION pg_walfile_name(pg_lsn) FROM PUBLIC");

        PostgresSinkConfig config = SinkDatabase.config(db.builderAs("identity", job));
        try (PostgresExactlyOnceWriter writer = db.freshWriter(config)) {
            assertThat(PostgresTwoPhaseCommitTest.commit(config, PostgresTwoPhaseCommitTest.checkpoint(writer, 1, "a")))
                    .extracting(request -> request.outcome).containsExactly(Outcome.COMMITTED);
        }

        assertThat(db.database.rows("SELECT system_identifier, timeline_id FROM onceflow_runs WHERE run = "
                + config.run())).containsExactly("null null");
        assertThat(db.deliveriesById()).containsOnlyKeys("a");
    }
}
