package io.onceflow.sink.kafka;

import java.security.SecureRandom;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.flink.api.connector.sink2.InitContext;

/**
 * The tag in a writer attempt's transactional ids ({@code <sink prefix>-<tag>-<subtask>-<n>}, see
 * {@link LeftoverTransactions#parse}): random, so that no two attempts share an id, and the same for
 * an attempt's writer and its committer, which the connector pairs by prefix (its backchannel hands
 * committed producers back to the writer's pool). Both run in one task, so a JVM-wide table carries
 * the tag from the first of them to the second, which removes it.
 */
final class AttemptTags {
    private static final String ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz";
    private static final int LENGTH = 8;
    private static final SecureRandom RANDOM = new SecureRandom();
    /** Tags handed to one of an attempt's writer and committer and not yet to the other. */
    private static final Map<String, String> HALF_TAKEN = new ConcurrentHashMap<>();

    private AttemptTags() {}

    /** The tag of this writer or committer's attempt of the sink with {@code sinkPrefix}. */
    static String take(InitContext context, String sinkPrefix) {
        String[] taken = new String[1];
        HALF_TAKEN.compute(attempt(context, sinkPrefix), (key, waiting) -> {
            taken[0] = waiting == null ? newTag() : waiting;
            return waiting == null ? taken[0] : null;
        });
        return taken[0];
    }

    /**
     * Forgets {@code tag} if the other of the attempt's writer and committer never took it (it failed
     * before): a later attempt with the same number (after a JobManager failover) must not get it.
     */
    static void release(InitContext context, String sinkPrefix, String tag) {
        HALF_TAKEN.remove(attempt(context, sinkPrefix), tag);
    }

    private static String attempt(InitContext context, String sinkPrefix) {
        return context.getJobInfo().getJobId() + "/" + sinkPrefix + "/" + context.getTaskInfo().getIndexOfThisSubtask()
                + "/" + context.getTaskInfo().getAttemptNumber() + "/" + context.getRestoredCheckpointId();
    }

    /** {@code g} and eight random base-36 characters: never a number, never a dash. */
    static String newTag() {
        StringBuilder tag = new StringBuilder(LENGTH + 1).append('g');
        for (int i = 0; i < LENGTH; i++) {
            tag.append(ALPHABET.charAt(RANDOM.nextInt(ALPHABET.length())));
        }
        return tag.toString();
    }

    /** Whether {@code text} has the form of a tag. */
    static boolean isTag(String text) {
        return text.length() == LENGTH + 1 && text.charAt(0) == 'g'
                && text.chars().skip(1).allMatch(c -> ALPHABET.indexOf(c) >= 0);
    }
}
