package io.onceflow.sink.postgres;

import java.util.Random;

/**
 * The freeze a {@link ProtocolSchedule} has armed: at a protocol step, for the writer of a subtask,
 * in the next operation of a kind that passes that step (a claim's steps: at a barrier, where a
 * writer claims if it has not yet). Used up by that operation.
 */
final class ArmedFreezes {
    enum Operation { START, BARRIER, COMMIT }

    private ScheduleExecution.ArmedFreeze armed;
    private Operation operation;

    /** Arms a freeze at a step and subtask drawn from {@code random}; says which. */
    String arm(Random random) {
        armed = new ScheduleExecution.ArmedFreeze(
                ScheduleAction.FREEZE_STEPS[random.nextInt(ScheduleAction.FREEZE_STEPS.length)], random.nextInt(3));
        operation = switch (armed.step()) {
            case FENCE_OPENING -> Operation.START;
            case CLAIM_DECIDED, CLAIM_RECORDED, BEFORE_PREPARE, AFTER_PREPARE -> Operation.BARRIER;
            default -> Operation.COMMIT;
        };
        return armed + " for the next " + operation;
    }

    /** The armed freeze if it is for {@code kind}: then it is used up; otherwise null. */
    ScheduleExecution.ArmedFreeze take(Operation kind) {
        if (armed == null || operation != kind) {
            return null;
        }
        ScheduleExecution.ArmedFreeze freeze = armed;
        armed = null;
        return freeze;
    }

    void clear() {
        armed = null;
    }
}
