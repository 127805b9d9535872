package io.onceflow.sink.postgres.internal.fencing;

import io.onceflow.sink.postgres.internal.schema.WritersTable;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;

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

    /** The indices that earlier writers of the prefix recorded, in order. */
    List<Integer> recordedIndices() throws SQLException {
        List<Integer> indices = new ArrayList<>();
        try (PreparedStatement query = connection.prepareStatement(writers.recordedIndicesQuery())) {
            query.setString(1, sinkPrefix);
            try (ResultSet rows = query.executeQuery()) {
                while (rows.next()) {
                    indices.add(rows.getInt(1));
                }
            }
        }
        return indices;
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
            if (token.claimCheckpoint() == ClaimToken.NO_CHECKPOINT) {
                upsert.setNull(4, java.sql.Types.BIGINT);
            } else {
                upsert.setLong(4, token.claimCheckpoint());
            }
            upsert.setInt(5, token.claimer());
            upsert.setInt(6, token.attempt());
            upsert.setLong(7, epoch);
            upsert.setString(8, jobId);
            upsert.executeUpdate();
        }
    }
}
