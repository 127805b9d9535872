package io.onceflow.sink.postgres.internal;

import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import org.apache.flink.annotation.Internal;

/**
 * Internal. What one effect transaction decided, per message id, before it stores it: the
 * function's result, or a failure about the message's data. Kept in memory until {@link
 * EffectCalls#store}, so that the events rows are locked only for that one statement, not while the
 * effects run.
 */
@Internal
final class EffectOutcomes {
    final List<String> ids = new ArrayList<>();
    final List<String> results = new ArrayList<>();
    final List<String> sqlStates = new ArrayList<>();
    final List<String> errors = new ArrayList<>();

    void result(String id, String json) {
        add(id, json, null, null);
    }

    void failure(String id, SQLException failure) {
        add(id, null, failure.getSQLState(), RowIsolation.describe(failure));
    }

    void failure(String id, String sqlState, String error) {
        add(id, null, sqlState, error);
    }

    private void add(String id, String result, String sqlState, String error) {
        ids.add(id);
        results.add(result);
        sqlStates.add(sqlState);
        errors.add(error);
    }

    int failures() {
        return failedIds().size();
    }

    /** The ids whose effect failed: they stay queued, marked failed. */
    List<String> failedIds() {
        List<String> failed = new ArrayList<>();
        for (int i = 0; i < ids.size(); i++) {
            if (sqlStates.get(i) != null) {
                failed.add(ids.get(i));
            }
        }
        return failed;
    }

    boolean isEmpty() {
        return ids.isEmpty();
    }
}
