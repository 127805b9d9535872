package io.onceflow.sink.postgres;

import static org.assertj.core.api.Assertions.fail;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The exactly-once writer's protocol under randomized, seeded schedules (issue #31): real writers
 * and committers against a real PostgreSQL, with Flink played by {@link ProtocolSchedule}: writes,
 * barriers, completed, declined and unnotified checkpoints, task failures, JobManager failovers
 * (attempt numbers from 0 again), rescales, resubmissions from a savepoint, attempts frozen at
 * every protocol step or between operations and woken later. After every action it checks that no
 * id is committed twice, nothing is visible that no completed checkpoint covers and nothing a
 * committed one covers is missing; at the end, that the job commits a last checkpoint and leaves
 * no prepared transaction.
 *
 * <p>Each schedule prints its seed; {@code -Donceflow.test.seed=N} runs that one schedule again.
 * A failing schedule is shrunk (actions removed while it still fails the same way) and the
 * shortest one found is printed with what each action did; {@code -Donceflow.schedule.keepGoing=true}
 * goes on to the next schedule and fails at the end with all of them. {@code -Donceflow.schedule.count=N}
 * runs N schedules ({@code mvn -Pschedules test} runs 400, with JobManager failovers and fresh
 * starts: see {@link ScheduleAction#JOBMANAGER_FAILOVERS}).
 */
class FencingScheduleTest {
    private static final int COUNT = Integer.getInteger("onceflow.schedule.count", 8);
    private static final int LENGTH = Integer.getInteger("onceflow.schedule.length", 40);
    private static final Duration SHRINK_BUDGET = Duration.ofSeconds(Long.getLong("onceflow.schedule.shrinkSeconds", 240));
    /** Goes on after a broken schedule, to find more than the first (each shrunk and printed). */
    private static final boolean KEEP_GOING = Boolean.getBoolean("onceflow.schedule.keepGoing");

    @Test
    void noScheduleLosesDuplicatesExposesOrStrandsOutput() throws Exception {
        Long fixedSeed = Long.getLong("onceflow.test.seed");
        long base = fixedSeed != null ? fixedSeed : System.nanoTime();
        int count = fixedSeed != null ? 1 : COUNT;
        List<String> failures = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            long seed = base + i;
            System.out.println("FencingScheduleTest seed " + seed + " (-Donceflow.test.seed=" + seed + ")");
            List<ScheduleAction> actions = ScheduleAction.generate(new Random(seed), LENGTH);
            Run run = run(actions);
            if (Boolean.getBoolean("onceflow.schedule.verbose")) {
                System.out.println(String.join("\n", run.log));
            }
            if (run.broken != null) {
                Run minimal = shrink(actions, run);
                String report = "seed " + seed + " broke the protocol: " + run.broken + "\nshortest schedule found ("
                        + minimal.actions.size() + " of " + actions.size() + " actions): " + minimal.broken + "\n"
                        + String.join("\n", minimal.log);
                if (!KEEP_GOING) {
                    fail(report);
                }
                System.out.println(report);
                failures.add("seed " + seed + ": " + minimal.broken);
            }
        }
        if (!failures.isEmpty()) {
            fail(failures.size() + " schedules broke the protocol (each printed with its shortest schedule):\n"
                    + String.join("\n", failures));
        }
    }

    /**
     * S6b of issue #31, as this test found it on the claims of that time (seed 67027896775397, shrunk
     * to two actions): the new JobManager's attempt 0 deferred its claim (it tied the old
     * JobManager's attempt 0), then froze with barrier 2 in its input; the restart's attempt 1
     * claimed at start by its attempt number; the zombie woke, claimed at barrier 2 as newer than that
     * claim at start, ended the live writer's session and rolled back its transaction of a checkpoint
     * that then completed: LOST. Every claim is made at a barrier now, so attempt 1's claim is at a
     * later barrier than 2 and the zombie is refused.
     */
    @Test
    void aZombieOfTheNewJobManagerDoesNotRollBackALaterAttemptsClaim() throws Exception {
        replay(new ScheduleAction(ScheduleAction.Kind.JOBMANAGER_FAILOVER, -873035975657654695L),
                new ScheduleAction(ScheduleAction.Kind.RESTART, -1258766011910326975L));
    }

    /**
     * S2 of issue #31, as this test found it with fresh starts in the schedules (seed 69629351734825,
     * shrunk to five actions): after a JobManager failover attempt 0 deferred its claim, received 21
     * events and claimed at barrier 2, so they waited, carried in checkpoint 2's writer state, for
     * the transaction after it; checkpoint 2 completed and the consumer group's offsets passed them;
     * the operator cancelled the job and started it fresh, which the registry allowed (nothing was
     * prepared): the 21 events were in neither PostgreSQL nor any state. A writer now prepares the
     * events it held in the barrier's own transaction, which the fresh-start check sees.
     */
    @Test
    void aFreshStartAfterAClaimAtABarrierLosesNothing() throws Exception {
        replay(new ScheduleAction(ScheduleAction.Kind.JOBMANAGER_FAILOVER, 8419992925551710035L),
                new ScheduleAction(ScheduleAction.Kind.WRITE, 7050721223135671487L),
                new ScheduleAction(ScheduleAction.Kind.BARRIER, -5402036456246780964L),
                new ScheduleAction(ScheduleAction.Kind.COMPLETE, -129382662228967739L),
                new ScheduleAction(ScheduleAction.Kind.FRESH_START, -4595204394174863221L));
    }

    /** Runs a shrunk schedule again and fails with what each action did if it still breaks the protocol. */
    private static void replay(ScheduleAction... actions) throws Exception {
        Run run = run(List.of(actions));
        if (run.broken != null) {
            fail(run.broken + "\n" + String.join("\n", run.log));
        }
    }

    private record Run(List<ScheduleAction> actions, String broken, List<String> log) {
        String kind() {
            return broken.substring(0, broken.indexOf(':'));
        }
    }

    private static Run run(List<ScheduleAction> actions) throws Exception {
        SinkDatabase db = new SinkDatabase();
        // a memory limit of about one event: held events take both paths, the heap and the spill file
        var config = SinkDatabase.config(db.builder("sched").setWriterLease(Duration.ofSeconds(1))
                .setHeldEventsMemoryBytes(400));
        ProtocolSchedule schedule = new ProtocolSchedule(db, config);
        String broken = schedule.run(actions);
        return new Run(actions, broken, schedule.log);
    }

    /** Removes chunks of actions, halving the chunk, while the schedule still breaks the same invariant. */
    private static Run shrink(List<ScheduleAction> actions, Run failing) throws Exception {
        Instant deadline = Instant.now().plus(SHRINK_BUDGET);
        Run best = failing;
        for (int chunk = Math.max(1, actions.size() / 2); chunk >= 1 && Instant.now().isBefore(deadline); chunk /= 2) {
            for (int from = 0; from < best.actions.size() && Instant.now().isBefore(deadline); ) {
                List<ScheduleAction> candidate = new ArrayList<>(best.actions);
                candidate.subList(from, Math.min(from + chunk, candidate.size())).clear();
                Run tried = run(candidate);
                if (tried.broken != null && tried.kind().equals(failing.kind())) {
                    best = tried;
                } else {
                    from += chunk;
                }
            }
        }
        return best;
    }
}
