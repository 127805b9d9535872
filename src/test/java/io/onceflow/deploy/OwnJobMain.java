package io.onceflow.deploy;

import io.onceflow.api.EventProcessor;
import io.onceflow.job.Onceflow;

/** A team's own main method, as a jar holding onceflow and the team's processor would have it. */
public final class OwnJobMain {
    private OwnJobMain() {}

    public static void main(String[] args) throws Exception {
        Onceflow.run(args, EventProcessor.passThrough());
    }
}
