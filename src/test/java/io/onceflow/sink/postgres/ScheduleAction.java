package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.internal.ProtocolHooks;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

/**
 * One step of a {@link FencingScheduleTest} schedule. Each action carries its own salt, from which
 * it draws every choice it makes (how many events, which attempt becomes a zombie, where a freeze
 * lands), so that removing other actions while shrinking a failing schedule leaves its meaning alone.
 * An action that does not apply in the state it meets (a completion with no checkpoint pending, a
 * wake-up with no zombie) does nothing.
 */
record ScheduleAction(Kind kind, long salt) {

    enum Kind {
        /** The running execution's writers get the next events of the input. */
        WRITE(30),
        /** Flink triggers a checkpoint: every writer prepares and snapshots at its barrier. */
        BARRIER(14),
        /** The pending checkpoint completes; its committer commits (or its notification is lost). */
        COMPLETE(12),
        /** The pending checkpoint is declined: its transactions wait for the next completed one. */
        ABORT(3),
        /** A task fails: Flink restarts every task (attempt + 1), some old attempts stay alive, frozen. */
        RESTART(5),
        /** The JobManager fails over: attempt numbers start at 0 again; some old attempts stay alive, frozen. */
        JOBMANAGER_FAILOVER(4),
        /** Flink restarts the job at another parallelism (same run). */
        RESCALE(3),
        /** Stop with a savepoint and submit again from it: a new run. */
        RESUBMIT(2),
        /**
         * The operator cancels the job and starts it fresh (no state, a new run, the input from the
         * consumer group's offsets, i.e. the latest completed checkpoint's position); refused while
         * prepared transactions wait, then it resumes from the latest checkpoint instead.
         */
        FRESH_START(2),
        /** A frozen old attempt wakes up and does what it was doing, and what it still had to do. */
        WAKE(6),
        /** The next operation of a running writer that reaches a given protocol step freezes there. */
        ARM_FREEZE(5);

        final int weight;

        Kind(int weight) {
            this.weight = weight;
        }
    }

    /** The steps an armed freeze may land on (a writer's own thread reaches each). */
    static final ProtocolHooks.Step[] FREEZE_STEPS = {
        ProtocolHooks.Step.FENCE_OPENING, ProtocolHooks.Step.CLAIM_DECIDED, ProtocolHooks.Step.CLAIM_RECORDED,
        ProtocolHooks.Step.BEFORE_PREPARE, ProtocolHooks.Step.AFTER_PREPARE, ProtocolHooks.Step.BEFORE_COMMIT,
        ProtocolHooks.Step.AFTER_COMMIT
    };

    static List<ScheduleAction> generate(Random random, int length) {
        int total = 0;
        for (Kind kind : Kind.values()) {
            total += kind.weight;
        }
        List<ScheduleAction> actions = new ArrayList<>(length);
        for (int i = 0; i < length; i++) {
            int pick = random.nextInt(total);
            Kind chosen = null;
            for (Kind kind : Kind.values()) {
                pick -= kind.weight;
                if (pick < 0) {
                    chosen = kind;
                    break;
                }
            }
            actions.add(new ScheduleAction(chosen, random.nextLong()));
        }
        return actions;
    }

    Random random() {
        return new Random(salt);
    }

    @Override
    public String toString() {
        return kind + "(" + salt + ")";
    }
}
