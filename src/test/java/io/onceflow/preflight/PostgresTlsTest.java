package io.onceflow.preflight;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** When postgres.url earns the warning that it does not verify a remote server ({@link PostgresTls#weakUrlWarning}). */
class PostgresTlsTest {
    private static final String REMOTE = "jdbc:postgresql://db.example.com:5432/app";

    @Test
    void aRemoteServerWithoutVerifyFullIsWarnedAbout() {
        assertThat(PostgresTls.weakUrlWarning(REMOTE)).hasValue("postgres.url: the URL of PostgreSQL at"
                + " db.example.com:5432/app has no sslmode (pgjdbc then uses prefer: no certificate check, and no TLS"
                + " at all if the server or anything on the way does not offer it). Add"
                + " sslmode=verify-full&sslrootcert=<the CA certificate, PEM> to postgres.url, with that file on the"
                + " JobManager and every TaskManager.");
        for (String mode : new String[] {"disable", "allow", "prefer", "require", "verify-ca"}) {
            assertThat(PostgresTls.weakUrlWarning(REMOTE + "?sslmode=" + mode)).as(mode).get().asString()
                    .startsWith("postgres.url: the URL of PostgreSQL at db.example.com:5432/app has sslmode=" + mode + " (")
                    .endsWith("Add sslmode=verify-full&sslrootcert=<the CA certificate, PEM> to postgres.url, with that"
                            + " file on the JobManager and every TaskManager.");
        }
        assertThat(PostgresTls.weakUrlWarning("jdbc:postgresql://10.0.0.7/app?ssl=false")).as("ssl=false: prefer").isPresent();
        assertThat(PostgresTls.weakUrlWarning("jdbc:postgresql://127.0.0.1,db.example.com/app"))
                .as("one of several hosts is remote").isPresent();
    }

    @Test
    void verifyFullOrALocalServerIsNot() {
        assertThat(PostgresTls.weakUrlWarning(REMOTE + "?sslmode=verify-full&sslrootcert=/etc/ca.pem")).isEmpty();
        assertThat(PostgresTls.weakUrlWarning(REMOTE + "?ssl=true")).as("pgjdbc: ssl=true is verify-full").isEmpty();
        assertThat(PostgresTls.weakUrlWarning("jdbc:postgresql://localhost:5432/app")).isEmpty();
        assertThat(PostgresTls.weakUrlWarning("jdbc:postgresql://127.0.0.1:5432/app?sslmode=disable")).isEmpty();
        assertThat(PostgresTls.weakUrlWarning("jdbc:postgresql://127.8.9.10/app")).isEmpty();
        assertThat(PostgresTls.weakUrlWarning("jdbc:postgresql://[::1]:5432/app")).isEmpty();
        assertThat(PostgresTls.weakUrlWarning("jdbc:postgresql:app")).as("no host: localhost").isEmpty();
        assertThat(PostgresTls.weakUrlWarning("jdbc:postgresql://pg/app?socketFactory="
                + "org.newsclub.net.unix.AFUNIXSocketFactory$FactoryArg&socketFactoryArg=/run/postgresql/.s.PGSQL.5432"))
                .as("a Unix socket").isEmpty();
        assertThat(PostgresTls.weakUrlWarning(REMOTE + "?sslmode=bogus")).as("refused by the driver itself").isEmpty();
    }
}
