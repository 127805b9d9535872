package io.onceflow.sink.postgres;

import io.onceflow.sink.postgres.internal.TransactionId;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * What a {@link ProtocolSchedule} checks in the database after every action. The input is the ids
 * {@code e0, e1, ...} in order, each once, so a completed checkpoint at input position P covers
 * exactly {@code e0 .. e(P-1)}:
 *
 * <ul>
 *   <li>DUPLICATE: no id is committed twice (its row's {@code deliveries} stays 1);
 *   <li>EXPOSED: nothing is visible that no completed checkpoint covers (an aborted checkpoint's,
 *       a discarded attempt's, a zombie's);
 *   <li>LOST: everything the committed checkpoints cover is visible;
 *   <li>at the end, after the last completed checkpoint committed, no prepared transaction of the
 *       sink is left (ORPHAN), and the job did complete and commit one (STALL).
 * </ul>
 */
final class ScheduleInvariants {
    private final SinkDatabase db;
    private final String sinkPrefix;
    private long committedPosition;

    ScheduleInvariants(SinkDatabase db, String sinkPrefix) {
        this.db = db;
        this.sinkPrefix = sinkPrefix;
    }

    /** A committer finished committing every committable of {@code checkpoint}. */
    void committed(ScheduleExecution.Completed checkpoint) {
        committedPosition = Math.max(committedPosition, checkpoint.position());
    }

    long committedPosition() {
        return committedPosition;
    }

    /** The first invariant broken now, or null. */
    String check(ScheduleExecution.Completed latest) throws SQLException {
        long covered = latest == null ? 0 : latest.position();
        Map<String, Integer> deliveries = db.deliveriesById();
        List<String> exposed = new ArrayList<>();
        int committedVisible = 0;
        for (Map.Entry<String, Integer> row : deliveries.entrySet()) {
            if (row.getValue() != 1) {
                return "DUPLICATE: " + row.getKey() + " committed " + row.getValue() + " times";
            }
            long position = Long.parseLong(row.getKey().substring(1));
            if (position >= covered) {
                exposed.add(row.getKey());
            }
            if (position < committedPosition) {
                committedVisible++;
            }
        }
        if (!exposed.isEmpty()) {
            return "EXPOSED: " + exposed.size() + " ids visible that no completed checkpoint covers (it covers up to "
                    + covered + "), e.g. " + exposed.get(0);
        }
        List<String> missing = new ArrayList<>();
        for (long p = 0; p < committedPosition && committedVisible + missing.size() < committedPosition; p++) {
            String id = ScheduleExecution.id(p);
            if (!deliveries.containsKey(id)) {
                missing.add(id);
            }
        }
        if (!missing.isEmpty()) {
            return "LOST: " + missing.size() + " ids of committed checkpoints (up to position " + committedPosition
                    + ") are not visible, e.g. "
                    + missing.subList(0, Math.min(5, missing.size()));
        }
        return null;
    }

    /** After the last checkpoint committed: everything visible, and nothing left prepared. */
    String checkEnd(ScheduleExecution.Completed latest) throws SQLException {
        String broken = check(latest);
        if (broken != null) {
            return broken;
        }
        if (latest == null || committedPosition != latest.position()) {
            return "STALL: the job did not complete and commit a checkpoint at the end (committed up to "
                    + committedPosition + ")";
        }
        List<TransactionId> prepared = db.prepared(sinkPrefix);
        return prepared.isEmpty() ? null
                : "ORPHAN: prepared transactions left after the last completed checkpoint committed: " + prepared;
    }
}
