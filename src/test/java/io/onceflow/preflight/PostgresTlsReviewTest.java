package io.onceflow.preflight;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/**
 * Review of issue 34 (adversarial): pgjdbc's sslfactory decides whether the certificate chain is
 * checked at all; sslmode=verify-full then only checks the host name against whatever certificate the
 * peer presents. NonValidatingFactory accepts any chain, so anyone on the path with a self-signed
 * certificate naming the host is accepted; the URL counts as verify-full and earns no warning.
 */
class PostgresTlsReviewTest {
    private static final String REMOTE = "jdbc:postgresql://db.example.com:5432/app?sslmode=verify-full";

    @Test
    void verifyFullWithANonValidatingSslFactoryIsWarnedAbout() {
        assertThat(PostgresTls.weakUrlWarning(REMOTE + "&sslfactory=org.postgresql.ssl.NonValidatingFactory"))
                .as("sslfactory=NonValidatingFactory: any certificate chain is accepted").isPresent();
    }
}
