package io.onceflow.sink.postgres.internal;

import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.util.Arrays;
import java.util.List;
import java.util.function.Predicate;
import org.apache.flink.annotation.Internal;
import org.postgresql.jdbc.PgConnection;

/**
 * Internal. Rows of the events table as one array per column, the shape a batch is bound in (one
 * array parameter per column, see {@link EventsTable}), so that a range of it can be written alone
 * when refused rows are isolated ({@link RowIsolation}).
 */
@Internal
public final class Rows {
    public final String[] ids;
    final String[] payloads;
    final String[] topics;
    final int[] partitions;
    final long[] offsets;
    final int[] deliveries;

    /** Rows that only have their ids, e.g. to call the effect for rows already in the table. */
    public static Rows ofIds(List<String> ids) {
        Rows rows = new Rows(ids.size());
        for (int i = 0; i < rows.size(); i++) {
            rows.ids[i] = ids.get(i);
        }
        return rows;
    }

    Rows(int size) {
        ids = new String[size];
        payloads = new String[size];
        topics = new String[size];
        partitions = new int[size];
        offsets = new long[size];
        deliveries = new int[size];
    }

    public int size() {
        return ids.length;
    }

    /** The rows whose id passes {@code filter}, copied. */
    public Rows select(Predicate<String> filter) {
        Rows selected = new Rows((int) Arrays.stream(ids).filter(filter).count());
        int to = 0;
        for (int from = 0; from < size(); from++) {
            if (filter.test(ids[from])) {
                selected.copy(this, from, to++);
            }
        }
        return selected;
    }

    private void copy(Rows source, int from, int to) {
        ids[to] = source.ids[from];
        payloads[to] = source.payloads[from];
        topics[to] = source.topics[from];
        partitions[to] = source.partitions[from];
        offsets[to] = source.offsets[from];
        deliveries[to] = source.deliveries[from];
    }

    /** Rows {@code from} (inclusive) to {@code to} (exclusive), copied. */
    Rows range(int from, int to) {
        Rows range = new Rows(to - from);
        for (int i = from; i < to; i++) {
            range.copy(this, i, i - from);
        }
        return range;
    }

    /** How many parameters {@link #bind} sets: one array per column. */
    static final int BOUND_PARAMETERS = 6;

    /** Binds the six column arrays of a batch's rows ({@link EventsTable}) from parameter {@code first} on. */
    void bind(PreparedStatement statement, int first) throws SQLException {
        // pgjdbc's own createArrayOf takes primitive arrays too (no boxing).
        PgConnection pg = statement.getConnection().unwrap(PgConnection.class);
        statement.setArray(first, pg.createArrayOf("text", ids));
        statement.setArray(first + 1, pg.createArrayOf("text", payloads));
        statement.setArray(first + 2, pg.createArrayOf("text", topics));
        statement.setArray(first + 3, pg.createArrayOf("int4", partitions));
        statement.setArray(first + 4, pg.createArrayOf("int8", offsets));
        statement.setArray(first + 5, pg.createArrayOf("int4", deliveries));
    }
}
