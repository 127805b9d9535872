package io.onceflow.chaos;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;

/**
 * How much chaos a run inflicts. The defaults are the short run of every {@code mvn verify}; the
 * {@code chaos} Maven profile raises them through system properties ({@code chaos.events},
 * {@code chaos.rate}, {@code chaos.taskManagerKills}, {@code chaos.brokerRestarts},
 * {@code chaos.postgresRestarts}, {@code chaos.upgrades}, {@code chaos.effectCancels},
 * {@code chaos.jobManagerFailovers}, {@code chaos.seed}).
 *
 * @param minimumEvents the producer writes at least this many records, and keeps writing until the last fault is over
 * @param eventsPerSecond the producer's rate limit
 * @param seed orders the faults and picks their moments; printed so that a failing run can be repeated
 */
record ChaosPlan(long minimumEvents, int eventsPerSecond, int taskManagerKills, int taskManagerPauses,
        int brokerRestarts, int postgresRestarts, int upgrades, int effectCancels, int jobManagerFailovers, long seed) {

    /** One fault. */
    enum Fault {
        KILL_TASK_MANAGER,
        /** SIGSTOP past the heartbeat timeout, SIGCONT once the job runs elsewhere: a zombie wakes up. */
        PAUSE_TASK_MANAGER,
        RESTART_KAFKA_BROKER,
        RESTART_POSTGRES,
        UPGRADE_WITH_RESCALE,
        /** A DBA's pg_cancel_backend of the effect workers' running batches, then their sessions cut off. */
        CANCEL_EFFECTS,
        /**
         * {@code kill -9} of the JobManager and a new one in its place, which recovers the job from the
         * HA store (ZooKeeper) and restores its latest checkpoint: attempts are numbered from 0 again.
         */
        KILL_JOB_MANAGER
    }

    static ChaosPlan fromSystemProperties() {
        return new ChaosPlan(
                Long.getLong("chaos.events", 100_000),
                Integer.getInteger("chaos.rate", 1_500),
                Integer.getInteger("chaos.taskManagerKills", 3),
                Integer.getInteger("chaos.taskManagerPauses", 1),
                Integer.getInteger("chaos.brokerRestarts", 1),
                Integer.getInteger("chaos.postgresRestarts", 1),
                Integer.getInteger("chaos.upgrades", 1),
                Integer.getInteger("chaos.effectCancels", 2),
                Integer.getInteger("chaos.jobManagerFailovers", 0),
                Long.getLong("chaos.seed", System.nanoTime()));
    }

    /** Every fault of the plan, in a random order fixed by the seed. */
    List<Fault> faultsInOrder(Random random) {
        List<Fault> faults = new ArrayList<>();
        faults.addAll(Collections.nCopies(taskManagerKills, Fault.KILL_TASK_MANAGER));
        faults.addAll(Collections.nCopies(taskManagerPauses, Fault.PAUSE_TASK_MANAGER));
        faults.addAll(Collections.nCopies(brokerRestarts, Fault.RESTART_KAFKA_BROKER));
        faults.addAll(Collections.nCopies(postgresRestarts, Fault.RESTART_POSTGRES));
        faults.addAll(Collections.nCopies(upgrades, Fault.UPGRADE_WITH_RESCALE));
        faults.addAll(Collections.nCopies(effectCancels, Fault.CANCEL_EFFECTS));
        faults.addAll(Collections.nCopies(jobManagerFailovers, Fault.KILL_JOB_MANAGER));
        Collections.shuffle(faults, random);
        return faults;
    }
}
