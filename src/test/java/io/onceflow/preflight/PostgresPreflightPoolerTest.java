package io.onceflow.preflight;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.config.OnceflowConfig;
import io.onceflow.config.ValidSettings;
import io.onceflow.sink.postgres.internal.SinkRuns;
import io.onceflow.testing.TestPostgres;
import io.onceflow.testing.TransactionPoolingProxy;
import io.onceflow.testing.TransactionPoolingProxy.Order;
import io.onceflow.testing.TransactionPoolingProxy.Pooling;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** {@code --check} reports a transaction pooler in postgres.url, as the run start would refuse it. */
class PostgresPreflightPoolerTest {
    private final TestPostgres.TestDatabase database = TestPostgres.shared().newDatabase();

    @Test
    void aTransactionPoolerIsReportedAndADirectConnectionIsNot() throws Exception {
        assertThat(problems(database.jdbcUrl())).isEmpty();
        try (TransactionPoolingProxy proxy = TransactionPoolingProxy.start(database, 2, Pooling.TRANSACTION,
                Order.LIFO)) {
            assertThat(problems(proxy.jdbcUrl())).singleElement().asString()
                    .startsWith("postgres.url: at ")
                    .endsWith(SinkRuns.transactionPoolingMessage());
        }
    }

    private List<String> problems(String url) {
        Map<String, String> settings = ValidSettings.required();
        settings.putAll(Map.of("postgres.url", url, "postgres.user", database.user(), "postgres.password",
                database.password(), "postgres.sink.prefix", "pooler"));
        return new PostgresPreflight(OnceflowConfig.fromMap(settings, Map.of()).postgres().orElseThrow(),
                Preflight.Purpose.RUN_JOB).problems();
    }
}
