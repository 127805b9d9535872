package io.onceflow.testing;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.testing.TestPostgres.TestDatabase;
import io.onceflow.testing.TransactionPoolingProxy.Order;
import io.onceflow.testing.TransactionPoolingProxy.Pooling;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import org.junit.jupiter.api.Test;

/** The proxy pools like PgBouncer: per transaction, or per session. */
class TransactionPoolingProxyTest {
    private final TestDatabase database = TestPostgres.shared().newDatabase();

    @Test
    void transactionsOneAfterTheOtherShareABackendAndOverlappingOnesDoNot() throws Exception {
        try (TransactionPoolingProxy proxy = TransactionPoolingProxy.start(database, 2, Pooling.TRANSACTION, Order.LIFO);
                Connection first = connect(proxy);
                Connection second = connect(proxy)) {
            first.setAutoCommit(false);
            second.setAutoCommit(false);

            int firstPid = TransactionPoolingProxy.backendPid(first);
            first.commit();
            int secondPid = TransactionPoolingProxy.backendPid(second);
            second.commit();
            assertThat(secondPid).as("the backend the first transaction gave back").isEqualTo(firstPid);

            int overlappingFirst = TransactionPoolingProxy.backendPid(first);
            int overlappingSecond = TransactionPoolingProxy.backendPid(second);
            assertThat(overlappingSecond).as("the other backend, the first is in a transaction")
                    .isNotEqualTo(overlappingFirst);
            first.commit();
            second.commit();
        }
    }

    @Test
    void aSessionSettingStaysOnTheBackendForTheNextClientsTransaction() throws Exception {
        try (TransactionPoolingProxy proxy = TransactionPoolingProxy.start(database, 1, Pooling.TRANSACTION, Order.LIFO);
                Connection first = connect(proxy);
                Connection second = connect(proxy);
                Statement setting = first.createStatement();
                Statement reading = second.createStatement()) {
            setting.execute("SET application_name = 'left-behind'");
            try (ResultSet row = reading.executeQuery("SELECT current_setting('application_name')")) {
                row.next();
                assertThat(row.getString(1)).isEqualTo("left-behind");
            }
        }
    }

    @Test
    void inSessionModeEachClientKeepsItsBackend() throws Exception {
        try (TransactionPoolingProxy proxy = TransactionPoolingProxy.start(database, 2, Pooling.SESSION, Order.LIFO);
                Connection first = connect(proxy);
                Connection second = connect(proxy)) {
            int firstPid = TransactionPoolingProxy.backendPid(first);
            int secondPid = TransactionPoolingProxy.backendPid(second);
            assertThat(secondPid).isNotEqualTo(firstPid);
            assertThat(TransactionPoolingProxy.backendPid(first)).isEqualTo(firstPid);
        }
    }

    private Connection connect(TransactionPoolingProxy proxy) throws SQLException {
        return DriverManager.getConnection(proxy.jdbcUrl(), database.user(), database.password());
    }
}
