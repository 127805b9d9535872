package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.internal.PendingTransactionsException;
import io.onceflow.sink.postgres.options.StartMode;
import io.onceflow.sink.postgres.internal.PostgresSinkConfig;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeoutException;

/**
 * Runs one {@link FencingScheduleTest} schedule: plays Flink (one checkpoint counter kept across
 * JobManagers, executions of writer attempts, committers that commit what a completed checkpoint
 * lists, restores of the latest completed checkpoint with its writer and committer state) against
 * real writers and committers on a real PostgreSQL, and checks the database after every action
 * ({@link ScheduleInvariants}). Old attempts that stay alive frozen are zombies: woken, they finish
 * what they were doing and do what their input still held for them.
 */
final class ProtocolSchedule {
    static final long OPERATION_TIMEOUT_MILLIS = 30_000;
    private static final int MAX_FAILED_STARTS_IN_A_ROW = 6;

    private final SinkDatabase db;
    private final ScheduleInvariants invariants;
    final List<String> log = new ArrayList<>();
    private PostgresSinkConfig config;
    private long checkpointCounter;
    private int jobManager;
    private int attemptsInJobManager;
    private int failedStartsInARow;
    private boolean quiescing;
    /** The latest completed checkpoint; null before the first. */
    private ScheduleExecution.Completed latest;
    /** What a restart restores: the latest completed checkpoint of this run, null before its first. */
    private ScheduleExecution.Completed restorable;
    /** Where the source starts without a checkpoint to restore: the consumer group's offsets. */
    private long startPosition;
    private ScheduleExecution live;
    private final List<ScheduleExecution.Writer> zombies = new ArrayList<>();
    private final ArmedFreezes freezes = new ArmedFreezes();
    private int attemptNames;

    ProtocolSchedule(SinkDatabase db, PostgresSinkConfig config) {
        this.db = db;
        this.config = config;
        this.invariants = new ScheduleInvariants(db, config.sinkPrefix());
    }

    /** Runs the actions, then quiesces; returns the first invariant broken, or null. */
    String run(List<ScheduleAction> actions) throws Exception {
        try {
            start(1, new Random(0));
            for (ScheduleAction action : actions) {
                String broken = act(action);
                if (broken == null) {
                    broken = invariants.check(latest);
                }
                if (broken != null) {
                    log.add("BROKEN after " + action + ": " + broken);
                    return broken;
                }
            }
            String broken = quiesce();
            if (broken != null) {
                log.add("BROKEN at the end: " + broken);
            }
            return broken;
        } catch (TimeoutException stall) {
            log.add("STALL: " + stall.getMessage());
            return "STALL: " + stall.getMessage();
        } finally {
            stopAll();
        }
    }

    private String act(ScheduleAction action) throws Exception {
        Random random = action.random();
        log.add(action.toString());
        switch (action.kind()) {
            case WRITE -> {
                if (live.write(1 + random.nextInt(30), null) != null) {
                    restart(random, false, live.parallelism, "a write failed or froze");
                }
            }
            case BARRIER -> barrier(random, false);
            case COMPLETE -> {
                return complete(random, random.nextInt(5) == 0);
            }
            case ABORT -> {
                if (live.pending != null) {
                    log.add("  checkpoint " + live.pending.id() + " declined");
                    live.pending = null;
                }
            }
            case RESTART -> restart(random, false, live.parallelism, "a task failed");
            case JOBMANAGER_FAILOVER -> restart(random, true, live.parallelism, "the JobManager failed over");
            case RESCALE -> restart(random, false, 1 + (live.parallelism + random.nextInt(2)) % 3, "rescale");
            case RESUBMIT -> resubmit(random);
            case FRESH_START -> freshStart(random);
            case WAKE -> {
                if (zombies.isEmpty()) {
                    return null;
                }
                // a third wake in a quiet moment; the others while a checkpoint is in flight, which then completes
                int moment = random.nextInt(3);
                if (moment == 2 && live.pending == null) {
                    inFlight(random);
                }
                if (!zombies.isEmpty()) {
                    wake(zombies.remove(random.nextInt(zombies.size())));
                }
                return moment == 0 ? null : complete(random, false);
            }
            case ARM_FREEZE -> {
                log.add("  armed " + freezes.arm(random));
            }
        }
        return null;
    }

    /** Every writer of the live execution takes barrier {@code ++counter}; a failure restarts the job. */
    private void barrier(Random random, boolean endOfInput) throws Exception {
        long id = ++checkpointCounter;
        String failed = live.barrier(id, endOfInput, freezes.take(ArmedFreezes.Operation.BARRIER));
        log.add("  checkpoint " + id + (failed == null ? " taken by every writer" : ": " + failed));
        if (failed != null) {
            restart(random, false, live.parallelism, "checkpoint " + id + " failed");
        }
    }

    /** A checkpoint with data in flight: events, then a barrier every writer takes (unless that fails). */
    private void inFlight(Random random) throws Exception {
        if (live.write(1 + random.nextInt(20), null) != null) {
            restart(random, false, live.parallelism, "a write failed");
        } else {
            barrier(random, false);
        }
    }

    /** Completes the pending checkpoint; its committer commits unless the notification is lost. */
    private String complete(Random random, boolean notificationLost) throws Exception {
        if (live.pending == null) {
            return null;
        }
        latest = live.complete();
        restorable = latest;
        log.add("  checkpoint " + latest.id() + " completed at position " + latest.position()
                + (notificationLost ? ", its notification lost" : ""));
        if (notificationLost) {
            return null;
        }
        ScheduleExecution.CommitResult result = live.commitUpTo(latest.id(), freezes.take(ArmedFreezes.Operation.COMMIT));
        if (result.failedOutcome() != null) {
            return "LOST: the committer could not commit " + result.failedOutcome();
        }
        if (result.interrupted() != null) {
            restart(random, false, live.parallelism, "the commit " + result.interrupted());
        } else {
            invariants.committed(latest);
        }
        return null;
    }

    /**
     * Flink restarts the job: restores the latest completed checkpoint into new attempts (attempt
     * numbers from 0 again after a JobManager failover). Old attempts frozen in an operation stay
     * alive as zombies; of the others, some freeze now (with input they had not processed yet),
     * the rest are cancelled.
     */
    private void restart(Random random, boolean newJobManager, int parallelism, String why) throws Exception {
        log.add("  restart (" + why + (newJobManager ? ", new JobManager" : "") + ") at parallelism " + parallelism);
        retire(random, live);
        if (newJobManager) {
            jobManager++;
            attemptsInJobManager = 0;
        } else {
            attemptsInJobManager++;
        }
        start(parallelism, random);
    }

    /** Stop with a savepoint (the latest completed checkpoint, committed), then a new submission from it. */
    private void resubmit(Random random) throws Exception {
        if (restorable == null || live.pending != null) {
            return;
        }
        ScheduleExecution.CommitResult result = live.commitUpTo(latest.id(), null);
        if (result.failedOutcome() != null || result.interrupted() != null) {
            restart(random, false, live.parallelism, "the savepoint's commit failed");
            return;
        }
        invariants.committed(latest);
        retire(random, live);
        config = register(live.parallelism, StartMode.RESTORE);
        jobManager++;
        attemptsInJobManager = 0;
        log.add("  resubmitted from checkpoint " + latest.id() + " as run " + config.run());
        start(1 + random.nextInt(3), random);
    }

    /**
     * Registers the new submission's run: refused while a session of the old one renewed its lease
     * lately (a frozen attempt, until its lease runs out), so tried again as an operator would.
     */
    private PostgresSinkConfig register(int parallelism, StartMode mode) throws Exception {
        for (int tries = 1; ; tries++) {
            try {
                return new PostgresRunRegistry(config).startRun(parallelism, mode, "resubmitted").config();
            } catch (PendingTransactionsException refused) {
                throw refused;
            } catch (IllegalStateException refused) {
                if (tries == 4) {
                    throw new TimeoutException("the resubmission was refused " + tries + " times: " + refused.getMessage());
                }
                log.add("  the resubmission is refused for now: " + refused.getMessage());
                Thread.sleep(1_500);
            }
        }
    }

    /**
     * The operator cancels the job and starts it fresh: a new run without state, reading from the
     * consumer group's offsets (committed at each completed checkpoint). The registry refuses while
     * prepared transactions wait; the operator then resumes from the latest checkpoint.
     */
    private void freshStart(Random random) throws Exception {
        retire(random, live);
        jobManager++;
        attemptsInJobManager = 0;
        try {
            config = register(live.parallelism, StartMode.FRESH);
            restorable = null;
            startPosition = latest == null ? 0 : latest.position();
            log.add("  started fresh as run " + config.run() + " at position " + startPosition);
        } catch (PendingTransactionsException refused) {
            config = register(live.parallelism, StartMode.RESTORE);
            log.add("  the fresh start is refused (" + refused.getMessage().lines().findFirst().orElse("")
                    + "); resumed as run " + config.run());
        }
        start(live.parallelism, random);
    }

    private void retire(Random random, ScheduleExecution execution) throws Exception {
        long inFlightBarrier = ++checkpointCounter; // a barrier the old attempts may still have received
        for (ScheduleExecution.Writer writer : execution.writers) {
            if (writer.attempt.isFrozen() || (!quiescing && random.nextInt(4) == 0)) {
                writer.becomeZombie(random, inFlightBarrier, latest);
                zombies.add(writer);
                log.add("  " + writer + " stays alive, frozen, with " + writer.zombieWork());
            } else {
                writer.cancel();
            }
        }
    }

    private void start(int parallelism, Random random) throws Exception {
        while (true) {
            String name = "jm" + jobManager + "-attempt" + attemptsInJobManager + "-" + (attemptNames++);
            live = new ScheduleExecution(config, parallelism, attemptsInJobManager, name, restorable, startPosition,
                    log);
            String failed = live.start(random.nextInt(parallelism + 2), freezes.take(ArmedFreezes.Operation.START));
            if (failed == null) {
                failedStartsInARow = 0;
                return;
            }
            log.add("  start failed: " + failed);
            if (++failedStartsInARow > MAX_FAILED_STARTS_IN_A_ROW) {
                throw new TimeoutException("STALL: " + failedStartsInARow + " starts in a row failed, the last: " + failed);
            }
            retire(random, live);
            attemptsInJobManager++;
        }
    }

    private void wake(ScheduleExecution.Writer zombie) throws Exception {
        log.add("  wakes " + zombie + ": " + zombie.wakeAndWork());
    }

    /** Wakes every zombie, then lets the job complete and commit a last checkpoint; checks the end state. */
    private String quiesce() throws Exception {
        log.add("quiesce");
        quiescing = true; // no new zombies: a restart now cancels the old attempts
        freezes.clear();
        for (int woken = 0; !zombies.isEmpty(); woken++) {
            if (woken == 100) {
                return "STALL: 100 zombies woken at the end and still more: " + zombies;
            }
            // each wakes while a checkpoint with data is in flight, which then completes
            Random random = new Random(zombies.size());
            if (live.pending == null) {
                inFlight(random);
            }
            wake(zombies.remove(0));
            String broken = complete(random, false);
            if (broken == null) {
                broken = invariants.check(latest);
            }
            if (broken != null) {
                return broken;
            }
        }
        int committedInARow = 0;
        for (int tries = 0; tries < 8 && committedInARow < 2; tries++) {
            Random random = new Random(tries);
            ScheduleExecution before = live;
            barrier(random, tries % 2 == 1 && committedInARow == 1);
            String broken = live == before ? complete(random, false) : null;
            if (broken != null) {
                return broken;
            }
            boolean committed = live == before && live.pending == null && latest != null
                    && invariants.committedPosition() == latest.position();
            committedInARow = committed ? committedInARow + 1 : 0;
        }
        return invariants.checkEnd(latest);
    }

    private void stopAll() {
        if (live != null) {
            live.writers.forEach(ScheduleExecution.Writer::cancel);
        }
        zombies.forEach(ScheduleExecution.Writer::cancel);
        zombies.clear();
    }
}
