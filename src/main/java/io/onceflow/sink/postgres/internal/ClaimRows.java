package io.onceflow.sink.postgres.internal;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.Set;
import java.util.TreeSet;

/**
 * The rows of one sink prefix in the writers table, as the claim protocol reads and writes them
 * ({@link IndexClaims}): one per subtask index, holding the {@link ClaimToken} of its newest claim.
 */
final class ClaimRows {
    private final Connection connection;
    private final WritersTable writers;
    private final String sinkPrefix;

    ClaimRows(Connection connection, WritersTable writers, String sinkPrefix) {
        this.connection = connection;
        this.writers = writers;
        this.sinkPrefix = sinkPrefix;
    }

    /**
     * Records {@code token}'s claim on the indices {@code first}, {@code first + step}, ... up to
     * {@code last} that have no newer or equal claim, creating their rows, and returns those it
     * recorded.
     */
    Set<Integer> fenceSeries(int first, int last, int step, ClaimToken token, long epoch, String jobId)
            throws SQLException {
        Set<Integer> recorded = new TreeSet<>();
        try (PreparedStatement upsert = connection.prepareStatement(writers.fenceSeriesStatement())) {
            upsert.setString(1, sinkPrefix);
            upsert.setLong(2, token.run());
            upsert.setLong(3, token.claimCheckpoint());
            upsert.setInt(4, token.claimer());
            upsert.setInt(5, token.attempt());
            upsert.setLong(6, epoch);
            upsert.setString(7, jobId);
            upsert.setInt(8, first);
            upsert.setInt(9, last);
            upsert.setInt(10, step);
            try (ResultSet rows = upsert.executeQuery()) {
                while (rows.next()) {
                    recorded.add(rows.getInt(1));
                }
            }
        }
        return recorded;
    }

    /**
     * Makes sure the index has a row before any claimant reads it {@code FOR UPDATE}: with no row,
     * two claimants would both read "unclaimed" and the later upsert (a zombie's, woken from a pause
     * between its read and its write) would overwrite a newer claim. The row lock serialises them.
     */
    void insertUnclaimed(int index) throws SQLException {
        try (PreparedStatement insert = connection.prepareStatement(writers.insertUnclaimedStatement())) {
            insert.setString(1, sinkPrefix);
            insert.setInt(2, index);
            insert.executeUpdate();
        }
    }

    /**
     * The index's current claim, or null if it has none.
     *
     * @param forUpdate lock the row until the transaction ends
     */
    ClaimToken read(int index, boolean forUpdate) throws SQLException {
        try (PreparedStatement query = connection.prepareStatement(writers.claimQuery(forUpdate))) {
            query.setString(1, sinkPrefix);
            query.setInt(2, index);
            try (ResultSet row = query.executeQuery()) {
                return row.next() && row.getInt(3) != WritersTable.UNCLAIMED
                        ? new ClaimToken(row.getLong(1), row.getLong(2), row.getInt(3), row.getInt(4)) : null;
            }
        }
    }

    /** Records {@code token}'s claim of the index, with the claimant's epoch and Flink job id. */
    void record(int index, ClaimToken token, long epoch, String jobId) throws SQLException {
        try (PreparedStatement upsert = connection.prepareStatement(writers.recordClaimStatement())) {
            upsert.setString(1, sinkPrefix);
            upsert.setInt(2, index);
            upsert.setLong(3, token.run());
            upsert.setLong(4, token.claimCheckpoint()); // a barrier's id: every claim is made at one
            upsert.setInt(5, token.claimer());
            upsert.setInt(6, token.attempt());
            upsert.setLong(7, epoch);
            upsert.setString(8, jobId);
            upsert.executeUpdate();
        }
    }
}
