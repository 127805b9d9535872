package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.internal.PendingTransactionsException;
import io.onceflow.sink.postgres.options.StartMode;
import io.onceflow.sink.postgres.options.PostgresTableOptions;
import io.onceflow.sink.postgres.internal.PostgresConnections;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import io.onceflow.sink.postgres.internal.PostgresSinkMetrics;
import io.onceflow.sink.postgres.internal.ProtocolHooks;
import io.onceflow.sink.postgres.internal.PostgresCommittable;
import io.onceflow.sink.postgres.internal.PostgresCommitter;
import io.onceflow.sink.postgres.internal.PostgresWriterState;
import io.onceflow.sink.postgres.internal.AdvisoryLocks;
import io.onceflow.sink.postgres.internal.StaleWriterException;
import io.onceflow.sink.postgres.internal.PostgresExactlyOnceWriter;
import io.onceflow.sink.postgres.internal.WriterStart;
import io.onceflow.testing.RecordingCommitRequest.Outcome;
import io.onceflow.testing.TestPostgres;
import java.io.IOException;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import static io.onceflow.sink.postgres.PostgresTwoPhaseCommitTest.checkpoint;
import static io.onceflow.sink.postgres.PostgresTwoPhaseCommitTest.commit;
import static io.onceflow.sink.postgres.PostgresTwoPhaseCommitTest.write;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;


/**
 * Attempts that overlap, against a real PostgreSQL server: a writer attempt that Flink gave up on
 * but that was only paused (GC, frozen VM, SIGSTOP) wakes up after its successor started. Each test
 * plays one interleaving by hand and checks that the zombie can neither roll back its successor's
 * transactions nor prepare after its successor's recovery, and that nothing is left prepared.
 */
class PostgresFencingTest {
    private final SinkDatabase db = new SinkDatabase();
    private final PostgresSinkConfig config = db.config("job");

    @Test
    void aZombieThatWakesBeforeItsFirstBarrierTouchesNothingAndCannotRollBackItsSuccessorsCheckpoint()
            throws Exception {
        try (PostgresExactlyOnceWriter first = db.freshWriter(config)) {
            commit(config, checkpoint(first, 1, "a"));
        }
        // Flink restores checkpoint 1 as attempt 2, whose TaskManager freezes before its first statement;
        // it gives up on it and restores checkpoint 1 again as attempt 3.
        WriterStart zombie = db.attempt(0, 1, OptionalLong.of(1));
        WriterStart successor = db.attempt(0, 1, OptionalLong.of(1));
        PostgresCommittable completed;
        try (PostgresExactlyOnceWriter writer = SinkDatabase.writer(config, successor)) {
            completed = checkpoint(writer, 2, "b"); // checkpoint 2 completes, the commit is on its way

            // The zombie wakes up and runs its start-up: it claims nothing before a barrier, which
            // never comes (Flink gave up on it), so it touches nothing.
            PostgresSinkMetrics zombieMetrics = PostgresSinkMetrics.unregistered();
            try (PostgresExactlyOnceWriter woken = new PostgresExactlyOnceWriter(config, zombie, zombieMetrics)) {
                write(woken, "z");
                assertThat(woken.prepareCommit()).as("named, prepared only at a barrier").hasSize(1);
                assertThat(zombieMetrics.olderAttemptsFenced.getCount()).isZero();
                assertThat(zombieMetrics.transactionsRolledBackOnRecovery.getCount()).isZero();
            }

            assertThat(db.prepared("job")).containsExactly(completed.transactionId());
            assertThat(commit(config, completed)).extracting(r -> r.outcome).containsExactly(Outcome.COMMITTED);
        }
        assertThat(db.deliveriesById()).containsExactlyInAnyOrderEntriesOf(Map.of("a", 1, "b", 1));
    }

    @Test
    void aZombieHoldingTheFenceIsCutOffAndCannotPrepareAfterItsSuccessorsRecovery() throws Exception {
        try (PostgresExactlyOnceWriter zombie = SinkDatabase.claimedWriter(config, db.attempt(0, 1, OptionalLong.of(1)),
                2)) {
            write(zombie, "x", "y"); // rows in its open transaction; then its TaskManager freezes

            // Flink restores checkpoint 1 again. The successor claims at its first barrier, 3: it ends
            // the zombie's session before its recovery scan; when the zombie wakes up at its next
            // barrier, its PREPARE cannot reach the database.
            try (PostgresExactlyOnceWriter successor = SinkDatabase.claimedWriter(config,
                    db.attempt(0, 1, OptionalLong.of(1)), 3)) {
                assertThatThrownBy(zombie::prepareCommit).isInstanceOf(IOException.class);
                assertThat(db.prepared("job")).as("no orphan holding row locks").isEmpty();

                // The successor's replay of the same rows goes through, without waiting for a lock.
                commit(config, checkpoint(successor, 4, "x", "y"));
            }
        }
        assertThat(db.deliveriesById()).containsExactlyInAnyOrderEntriesOf(Map.of("x", 1, "y", 1));
    }

    @Test
    void aZombiesPrepareThatReachedTheDatabaseBeforeItWasCutOffIsRolledBackByTheSuccessor() throws Exception {
        PostgresCommittable late;
        try (PostgresExactlyOnceWriter zombie = db.restoredWriter(config, 1)) {
            late = checkpoint(zombie, 2, "x"); // prepared, but checkpoint 2 never completes

            try (PostgresExactlyOnceWriter successor = db.restoredWriter(config, 1)) {
                successor.snapshotState(3); // its first barrier: it claims and recovers
                assertThat(db.prepared("job")).doesNotContain(late.transactionId());
                commit(config, checkpoint(successor, 4, "x"));
            }
        }
        assertThat(db.deliveriesById()).containsExactlyEntriesOf(Map.of("x", 1));
    }

    @Test
    void aWriterOfAReplacedRunStopsAtItsFirstStatementWhateverItsAttemptNumber() throws Exception {
        PostgresSinkConfig upgraded = SinkDatabase.newRun(config); // stop-with-savepoint and resubmission
        WriterStart oldJobsZombie = db.attempt(0, 1, OptionalLong.of(7));
        try (PostgresExactlyOnceWriter writer = SinkDatabase.writer(upgraded, db.attempt(0, 1, OptionalLong.of(3)))) {
            PostgresCommittable pending = checkpoint(writer, 4, "a");

            assertThatThrownBy(() -> SinkDatabase.writer(config, oldJobsZombie))
                    .isInstanceOf(IOException.class)
                    .hasMessageContaining("belongs to a newer run")
                    .hasMessageContaining("test job");

            assertThat(db.prepared("job")).containsExactly(pending.transactionId());
        }
    }

    @Test
    void restoringACheckpointRollsBackWhatAnotherBranchPreparedWithALowerCheckpointId() throws Exception {
        List<PostgresWriterState> atCheckpoint1;
        List<PostgresWriterState> atCheckpoint2;
        try (PostgresExactlyOnceWriter writer = db.freshWriter(config)) {
            write(writer, "a");
            PostgresCommittable first = writer.prepareCommit().iterator().next();
            atCheckpoint1 = writer.snapshotState(1);
            commit(config, first);
            write(writer, "b");
            PostgresCommittable second = writer.prepareCommit().iterator().next();
            atCheckpoint2 = writer.snapshotState(2);
            commit(config, second);
        }
        assertThat(atCheckpoint1).as("one copy for every subtask any new parallelism up to 128 may have")
                .hasSize(128).allMatch(state -> state.equals(atCheckpoint1.get(0)));

        // Another branch is started from the savepoint of checkpoint 1 and dies with checkpoint 2 prepared.
        PostgresSinkConfig branch = SinkDatabase.newRun(config);
        PostgresCommittable orphan;
        try (PostgresExactlyOnceWriter writer = SinkDatabase.writer(branch,
                db.attempt(0, 1, OptionalLong.of(1), atCheckpoint1.get(0)))) {
            orphan = checkpoint(writer, 2, "c");
        }
        assertThat(orphan.transactionId().checkpointId()).isEqualTo(2);

        // Back to the first branch's checkpoint 2: the orphan is not among its committables.
        PostgresSinkConfig back = SinkDatabase.newRun(config);
        try (PostgresExactlyOnceWriter writer = SinkDatabase.claimedWriter(back,
                db.attempt(0, 1, OptionalLong.of(2), atCheckpoint2.get(0)), 3)) {
            assertThat(db.prepared("job")).as("rolled back: it holds the lock of row c").isEmpty();
            commit(config, checkpoint(writer, 4, "c"));
        }
        assertThat(db.deliveriesById()).containsExactlyInAnyOrderEntriesOf(Map.of("a", 1, "b", 1, "c", 1));
    }

    @Test
    void aSecondJobWithTheSamePrefixIsRefusedWhileTheFirstOneRuns() throws Exception {
        try (PostgresExactlyOnceWriter running = db.freshWriter(config)) {
            assertThatThrownBy(() -> db.builder("job").build().startRun(1, StartMode.FRESH, "second job"))
                    .as("a writer is live before its first barrier, holding no lock yet")
                    .hasMessageContaining("'job' is in use by a running job")
                    .hasMessageContaining("onceflow-job-writer-0");
            running.prepareCommit();
            running.snapshotState(1); // its claim records the Flink job id
            assertThatThrownBy(() -> db.builder("job").build().startRun(1, StartMode.FRESH, "second job"))
                    .isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("'job' is in use by a running job")
                    .hasMessageContaining("test-job-id")
                    .hasMessageContaining("'test job'")
                    .hasMessageContaining("onceflow-job-writer-0")
                    .hasMessageContaining("give this job its own postgres.sink.prefix");
        }
        db.builder("job").build().startRun(1, StartMode.FRESH, "second job"); // the first one has stopped
    }

    @Test
    void aSecondExecutionOfTheSameJobContinuesItsRunWhileItsWritersRun() throws Exception {
        PostgresRunRegistry sink = db.builder("job").build();
        RegisteredRun first = sink.startRun(1, StartMode.FRESH, "test job", "a1b2");
        assertThat(sink.continueRun(1, "c3d4")).as("another job id registered nothing").isEmpty();
        try (PostgresExactlyOnceWriter running = db.freshWriter(first.config())) {
            checkpoint(running, 1, "a"); // a live writer and a prepared transaction, as after a failover

            // main again, under the same job id: no check refuses, no new run stops the writer
            RegisteredRun continued = sink.continueRun(1, "a1b2").orElseThrow();
            assertThat(continued.config().run()).isEqualTo(first.config().run());
            assertThat(db.prepared("job")).hasSize(1);

            // while a new submission under another id is refused as ever
            assertThatThrownBy(() -> sink.startRun(1, StartMode.RESTORE, "test job", "c3d4"))
                    .isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("is in use by a running job");
        }
        RegisteredRun next = sink.startRun(1, StartMode.RESTORE, "test job", "c3d4");
        assertThat(next.config().run()).isGreaterThan(first.config().run());
        assertThat(sink.continueRun(1, "c3d4").orElseThrow().config().run()).isEqualTo(next.config().run());
        // the replaced job's main, run again by its JobManager, must not run on: its Kafka writers
        // would abort the new job's transactions
        assertThatThrownBy(() -> sink.continueRun(1, "a1b2"))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("which a newer run replaced")
                .hasMessageContaining("must not run on");
    }

    @Test
    void aPausedSessionHoldingTheFenceDoesNotBlockANewRunAndIsEndedByItsWriter() throws Exception {
        PostgresSinkConfig shortLease = db.config(db.builder("paused").setWriterLease(Duration.ofMillis(600)));
        try (Connection paused = db.database.connect()) {
            try (Statement statement = paused.createStatement()) {
                // What a frozen writer's session looks like: it holds the lock and says nothing.
                statement.execute("SET application_name = 'onceflow-paused-writer-0'");
                statement.execute("SELECT pg_advisory_lock(" + AdvisoryLocks.lockKey("paused") + ", 0)");
            }
            Thread.sleep(1_000); // longer than the lease

            RegisteredRun next = new PostgresRunRegistry(shortLease).startRun(1, StartMode.FRESH, "next job");
            try (PostgresExactlyOnceWriter writer = db.freshWriter(next.config())) {
                commit(next.config(), checkpoint(writer, 1, "a"));
            }
            assertThat(paused.isValid(2)).as("its session was ended").isFalse();
        }
        assertThat(db.deliveriesById()).containsExactlyEntriesOf(Map.of("a", 1));
    }

    @Test
    void aSessionOfAnotherApplicationOnTheSameLockIsNeverEnded() throws Exception {
        try (Connection other = db.database.connect()) {
            try (Statement statement = other.createStatement()) {
                statement.execute("SET application_name = 'billing'");
                statement.execute("SELECT pg_advisory_lock(" + AdvisoryLocks.lockKey("job") + ", 0)");
            }
            assertThatThrownBy(() -> SinkDatabase.claimedWriter(config, db.attempt(0, 1, OptionalLong.empty()), 1))
                    .hasMessageContaining("held by another application")
                    .hasMessageContaining("billing");
            assertThat(other.isValid(2)).isTrue();
        }
    }

    @Test
    void aFreshStartIsRefusedWhileThePrefixHasPreparedTransactions() throws Exception {
        try (PostgresExactlyOnceWriter crashed = db.freshWriter(config)) {
            checkpoint(crashed, 1, "a"); // completed or not: nobody can tell from here
        }
        PostgresRunRegistry sink = db.builder("job").build();

        assertThatThrownBy(() -> sink.startRun(1, StartMode.FRESH, "restarted job"))
                .isInstanceOfSatisfying(PendingTransactionsException.class, e -> {
                    assertThat(e.preparedTransactions()).isEqualTo(1);
                    assertThat(e.previousJobId()).contains("test-job-id");
                })
                .hasMessageContaining("has 1 prepared transaction(s)")
                .hasMessageContaining("Resume from the earlier run's latest retained checkpoint")
                .hasMessageContaining("fresh.start.pending=discard");
        assertThat(db.prepared("job")).hasSize(1);

        sink.startRun(1, StartMode.RESTORE, "resumed job"); // the committer commits it
        RegisteredRun discarding = sink.startRun(1, StartMode.FRESH_DISCARDING_PENDING, "discarding job");
        SinkDatabase.claimedWriter(discarding.config(), db.attempt(0, 1, OptionalLong.empty()), 1).close();
        assertThat(db.prepared("job")).isEmpty();
    }

    @Test
    void hostileRoleDefaultsDoNotReachTheSinksSessions() throws Exception {
        assumeTrue(TestPostgres.shared().canRestart(), "creates roles that log in without a password: embedded server only");
        String role = "hostile_" + Long.toHexString(System.nanoTime());
        db.execute("CREATE ROLE " + role + " LOGIN");
        db.execute("GRANT CREATE, USAGE ON SCHEMA public TO " + role);
        db.execute("GRANT ALL ON ALL TABLES IN SCHEMA public TO " + role);
        for (String setting : List.of("idle_in_transaction_session_timeout = '300ms'", "idle_session_timeout = '300ms'",
                "transaction_timeout = '500ms'", "default_transaction_isolation = 'serializable'",
                "default_transaction_read_only = on", "statement_timeout = '1ms'", "lock_timeout = '1ms'",
                "synchronous_commit = off")) {
            db.execute("ALTER ROLE " + role + " SET " + setting);
        }
        PostgresSinkConfig hostile = db.config(db.builderAs("hostile", role));
        try (Connection session = PostgresConnections.open(hostile, "probe");
                Statement statement = session.createStatement()) {
            // what the sink relies on, whatever the role says (a serializable writer would fail on
            // its siblings' rows; a read-only one could not write at all)
            assertThat(PostgresTwoPhaseCommitTest.show(statement, "default_transaction_isolation")).isEqualTo("read committed");
            assertThat(PostgresTwoPhaseCommitTest.show(statement, "default_transaction_read_only")).isEqualTo("off");
            assertThat(PostgresTwoPhaseCommitTest.show(statement, "idle_in_transaction_session_timeout")).isEqualTo("0");
            assertThat(PostgresTwoPhaseCommitTest.show(statement, "idle_session_timeout")).isEqualTo("0");
            assertThat(PostgresTwoPhaseCommitTest.show(statement, "transaction_timeout")).isEqualTo("0");
            assertThat(PostgresTwoPhaseCommitTest.show(statement, "synchronous_commit")).isEqualTo("on");
        }
        try (PostgresExactlyOnceWriter writer = db.freshWriter(hostile)) {
            db.query("SELECT usename FROM pg_stat_activity WHERE application_name = 'onceflow-hostile-writer-0'",
                    row -> assertThat(row.getString(1)).as("the writer runs as the hostile role").isEqualTo(role));
            write(writer, "a");
            Thread.sleep(700); // idle in transaction, past every hostile timeout
            write(writer, "b");
            writer.flush(false);
            Thread.sleep(700);
            PostgresCommittable committable = writer.prepareCommit().iterator().next();
            writer.snapshotState(1);
            Thread.sleep(700); // idle between transactions
            assertThat(commit(hostile, committable)).extracting(r -> r.outcome).containsExactly(Outcome.COMMITTED);
            commit(hostile, checkpoint(writer, 2, "c"));
        }
        assertThat(db.deliveriesById()).containsOnlyKeys("a", "b", "c");
    }

    @Test
    void aCommitByAnotherRoleSaysWhichRoleOwnsTheTransaction() throws Exception {
        assumeTrue(TestPostgres.shared().canRestart(), "creates roles that log in without a password: embedded server only");
        String role = "other_" + Long.toHexString(System.nanoTime());
        db.execute("CREATE ROLE " + role + " LOGIN");
        PostgresCommittable committable;
        try (PostgresExactlyOnceWriter writer = db.freshWriter(config)) {
            committable = checkpoint(writer, 1, "a");
        }
        PostgresSinkConfig otherRole = db.builderAs("job", role).build().config();

        assertThatThrownBy(() -> commit(otherRole, committable))
                .isInstanceOf(IOException.class)
                .hasMessageContaining("belongs to database role '" + db.database.user() + "'")
                .hasMessageContaining("Run the job as '" + db.database.user() + "'");
        assertThat(commit(config, committable)).extracting(r -> r.outcome).containsExactly(Outcome.COMMITTED);
    }

    @Test
    void twoOverlappingCommittersRetryABusyTransactionInsteadOfFailing() {
        assertThat(io.onceflow.sink.postgres.internal.SqlStates.isTransient(new SQLException("prepared transaction is busy", "55000"))).isTrue();
        assertThat(io.onceflow.sink.postgres.internal.SqlStates.isTransient(new SQLException("permission denied", "42501"))).isFalse();
    }

    @Test
    void theWritersTableNamesTheHolderOfEachIndex() throws Exception {
        try (PostgresExactlyOnceWriter writer = SinkDatabase.claimedWriter(config, db.attempt(0, 1, OptionalLong.of(5)),
                7)) {
            db.query("SELECT run, restored_checkpoint, claimed_by_subtask, job_id FROM "
                    + PostgresTableOptions.DEFAULT_WRITERS + " WHERE sink_prefix = 'job'", row -> {
                        assertThat(row.getLong(1)).isEqualTo(config.run());
                        assertThat(row.getLong(2)).as("the barrier it claimed at").isEqualTo(7);
                        assertThat(row.getInt(3)).isZero();
                        assertThat(row.getString(4)).isEqualTo("test-job-id");
                    });
        }
    }

    /**
     * A zombie that pauses after it judged a claim and before it records its own, while it holds
     * the index's row lock: on the first claim of an index (nothing recorded yet), and on a later
     * one. Its successor must neither be overwritten by the zombie's late write (which would let the
     * zombie roll back a completed checkpoint) nor wait for the pause to end: the server ends the
     * paused session after one lease, and the successor claims.
     */
    @Test
    void aZombiePausedBetweenJudgingAndRecordingAFirstClaimCanNeitherBlockNorOverwriteItsSuccessor() throws Exception {
        PostgresSinkConfig leased = db.config(db.builder("first").setWriterLease(Duration.ofMillis(600)));
        assertPausedClaimantIsCutOff(leased, OptionalLong.empty());
    }

    @Test
    void aZombiePausedBetweenJudgingAndRecordingALaterClaimCanNeitherBlockNorOverwriteItsSuccessor() throws Exception {
        PostgresSinkConfig leased = db.config(db.builder("later").setWriterLease(Duration.ofMillis(600)));
        try (PostgresExactlyOnceWriter first = db.freshWriter(leased)) {
            commit(leased, checkpoint(first, 1, "before"));
        }
        assertPausedClaimantIsCutOff(leased, OptionalLong.of(1));
    }

    /**
     * S9: an older attempt recorded its claim and, before it takes the index's advisory lock, a newer
     * one records its own (finding no holder to end) and has not committed it yet. The older one's
     * check after the lock must wait for that commit and give way, not read past it and act as the
     * holder while the newer one waits for the lock. Fails with the check an unlocked read (tried:
     * the older attempt started as the holder).
     */
    @Test
    void anOlderAttemptChecksItsClaimAfterTheLockAgainstANewerOneNotCommittedYet() throws Exception {
        try (PostgresExactlyOnceWriter first = db.freshWriter(config)) {
            commit(config, checkpoint(first, 1, "before"));
        }
        CountDownLatch olderRecorded = new CountDownLatch(1);
        CountDownLatch olderGoesOn = new CountDownLatch(1);
        CountDownLatch newerDecided = new CountDownLatch(1);
        CountDownLatch newerGoesOn = new CountDownLatch(1);
        PostgresSinkConfig olderSink = config.withHook((step, transaction) -> {
            if (step == ProtocolHooks.Step.CLAIM_RECORDED) {
                olderRecorded.countDown();
                olderGoesOn.await();
            }
        });
        PostgresSinkConfig newerSink = config.withHook((step, transaction) -> {
            if (step == ProtocolHooks.Step.CLAIM_DECIDED) {
                newerDecided.countDown();
                newerGoesOn.await(); // the index's row stays locked, the newer claim not recorded yet
            }
        });
        CompletableFuture<PostgresExactlyOnceWriter> older = new CompletableFuture<>();
        CompletableFuture<PostgresExactlyOnceWriter> newer = new CompletableFuture<>();
        try {
            writerThread(olderSink, db.attempt(0, 1, OptionalLong.of(1)), 2, older).start();
            assertThat(olderRecorded.await(10, TimeUnit.SECONDS)).as("the older attempt recorded its claim").isTrue();
            writerThread(newerSink, db.attempt(0, 1, OptionalLong.of(1)), 3, newer).start();
            assertThat(newerDecided.await(10, TimeUnit.SECONDS)).as("the newer attempt judged the claim").isTrue();
            olderGoesOn.countDown(); // the older one takes the lock and checks its claim
            Thread.sleep(1000);
            newerGoesOn.countDown();

            assertThatThrownBy(() -> older.get(30, TimeUnit.SECONDS)).as("the older attempt gave way")
                    .hasStackTraceContaining(StaleWriterException.class.getName());
            newer.get(30, TimeUnit.SECONDS).close();
        } finally {
            olderGoesOn.countDown();
            newerGoesOn.countDown();
            if (!older.isCompletedExceptionally() && older.isDone()) {
                older.get().close(); // the older attempt kept the index: let the newer one go
            }
        }
    }

    /**
     * A thread, not started, that starts a writer of {@code attempt} and takes it through its first
     * barrier; its outcome completes {@code started}.
     */
    private static Thread writerThread(PostgresSinkConfig sink, WriterStart attempt, long barrier,
            CompletableFuture<PostgresExactlyOnceWriter> started) {
        return new Thread(() -> {
            try {
                started.complete(SinkDatabase.claimedWriter(sink, attempt, barrier));
            } catch (Throwable e) {
                started.completeExceptionally(e);
            }
        });
    }

    private void assertPausedClaimantIsCutOff(PostgresSinkConfig leased, OptionalLong restored) throws Exception {
        CountDownLatch paused = new CountDownLatch(1);
        CountDownLatch sigcont = new CountDownLatch(1);
        PostgresSinkConfig zombieSink = leased.withHook((step, transaction) -> {
            if (step == ProtocolHooks.Step.CLAIM_DECIDED) {
                paused.countDown();
                sigcont.await(); // SIGSTOP: the row lock stays with the paused session
            }
            if (step == ProtocolHooks.Step.LEASE_RENEWAL && paused.getCount() == 0) {
                sigcont.await(); // the whole process is paused, its lease keeper too
            }
        });
        try {
            WriterStart zombie = db.attempt(0, 1, restored);
            CompletableFuture<PostgresExactlyOnceWriter> zombieStart = new CompletableFuture<>();
            writerThread(zombieSink, zombie, 2, zombieStart).start();
            assertThat(paused.await(10, TimeUnit.SECONDS)).as("the zombie reached its claim").isTrue();

            PostgresCommittable completed;
            long started = System.nanoTime();
            try (PostgresExactlyOnceWriter successor = SinkDatabase.claimedWriter(leased, db.attempt(0, 1, restored), 3)) {
                assertThat(Duration.ofNanos(System.nanoTime() - started)).as("the successor waited about one lease")
                        .isLessThan(Duration.ofSeconds(10));
                completed = checkpoint(successor, 4, "a"); // checkpoint 4 completes; the task fails before the commit
            }
            sigcont.countDown();
            assertThatThrownBy(() -> zombieStart.get(30, TimeUnit.SECONDS))
                    .as("the woken zombie's session was ended by the server").isInstanceOf(ExecutionException.class);

            assertThat(db.prepared(leased.sinkPrefix())).containsExactly(completed.transactionId());
            try (PostgresExactlyOnceWriter restoredWriter = SinkDatabase.writer(leased, db.attempt(0, 1, OptionalLong.of(4)))) {
                assertThat(commit(leased, completed)).extracting(r -> r.outcome).containsExactly(Outcome.COMMITTED);
            }
            assertThat(db.deliveriesById()).containsEntry("a", 1);
        } finally {
            sigcont.countDown();
        }
    }

    @Test
    void anAtLeastOnceStartRefusesWhileAnExactlyOnceRunLeftTransactionsPreparedAndDiscardsThemOnRequest()
            throws Exception {
        PostgresCommittable pending;
        try (PostgresExactlyOnceWriter writer = db.freshWriter(config)) {
            pending = checkpoint(writer, 1, "a"); // the job dies before the commit
        }
        PostgresRunRegistry atLeastOnce = new PostgresRunRegistry(config);

        assertThatThrownBy(() -> atLeastOnce.startAtLeastOnce(false))
                .isInstanceOf(PendingTransactionsException.class)
                .hasMessageContaining("1 prepared transaction(s) of an earlier exactly-once run")
                .hasMessageContaining("fresh.start.pending=discard");
        assertThat(db.prepared("job")).containsExactly(pending.transactionId());

        atLeastOnce.startAtLeastOnce(true);
        assertThat(db.prepared("job")).isEmpty();
    }

    @Test
    void aUniqueIndexBesideThePrimaryKeyIsRefusedBeforeItCanDeadlockTwoSubtasksAcrossACheckpoint() throws Exception {
        db.execute("CREATE UNIQUE INDEX one_event_per_order ON onceflow_events ((payload->>'order'))");
        PostgresRunRegistry sink = new PostgresRunRegistry(config);

        assertThatThrownBy(() -> sink.startRun(2, StartMode.RESTORE, "test job"))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("one_event_per_order")
                .hasMessageContaining("parallelism 1");
        // With one writer subtask the second id of an order is refused like any row (RefusedRowsTest).
        sink.startRun(1, StartMode.RESTORE, "test job");
    }

    @Test
    void aPrefixWhoseLockKeyCollidesWithAnotherApplicationsIsToldSo() throws Exception {
        String colliding = "xAa"; // "onceflow-writer:xAa" and "onceflow-writer:xBB" share a String hash
        assertThat(AdvisoryLocks.lockKey("xAa")).isEqualTo(AdvisoryLocks.lockKey("xBB"));
        PostgresSinkConfig first = db.config(colliding);
        try (PostgresExactlyOnceWriter writer = SinkDatabase.claimedWriter(first, db.attempt(0, 1, OptionalLong.empty()),
                1)) {
            assertThatThrownBy(() -> new PostgresRunRegistry(db.builder("xBB").build().config())
                            .startRun(1, StartMode.FRESH, "second job"))
                    .isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("held by another application")
                    .hasMessageContaining("Give this job another postgres.sink.prefix");
        }
    }
}
