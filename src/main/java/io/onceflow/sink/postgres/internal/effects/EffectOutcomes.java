package io.onceflow.sink.postgres.internal.effects;

import io.onceflow.sink.postgres.internal.writer.RowIsolation;
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
        return (int) sqlStates.stream().filter(state -> state != null).count();
    }

    boolean isEmpty() {
        return ids.isEmpty();
    }
}
