package io.onceflow.testing;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A throw-away certificate authority and server certificates signed by it, made with the JDK's own
 * {@code keytool} in a directory of the caller's: nothing is checked in, and every run has fresh keys.
 *
 * <p>Each server certificate comes in the two forms the servers want: a PKCS#12 key store with the key
 * and its chain (the Kafka broker) and PEM files, the certificate and an unencrypted PKCS#8 key readable
 * by its owner only (PostgreSQL refuses a key file that others may read). Clients trust {@link
 * #caPem()} (pgjdbc's {@code sslrootcert}) or {@link #trustStore()} (Kafka's {@code
 * ssl.truststore.location}).
 */
public final class TestCertificates {
    /** The password of every key store made here; these are test keys, valid for a day. */
    public static final String STORE_PASSWORD = "onceflow-test-store";
    private static final String VALIDITY_DAYS = "1";
    private static final Duration KEYTOOL_TIMEOUT = Duration.ofSeconds(60);

    private final Path directory;

    private TestCertificates(Path directory) {
        this.directory = directory;
    }

    /** Makes a new certificate authority in {@code directory} (created if missing). */
    public static TestCertificates newAuthority(Path directory) {
        TestCertificates authority = new TestCertificates(directory);
        try {
            Files.createDirectories(directory);
        } catch (IOException e) {
            throw new IllegalStateException("could not create " + directory, e);
        }
        authority.keytool("-genkeypair", "-keystore", authority.caStore().toString(), "-alias", "ca",
                "-keyalg", "EC", "-groupname", "secp256r1", "-dname", "CN=onceflow test CA",
                "-ext", "bc:c", "-validity", VALIDITY_DAYS);
        authority.keytool("-exportcert", "-keystore", authority.caStore().toString(), "-alias", "ca", "-rfc",
                "-file", authority.caPem().toString());
        authority.keytool("-importcert", "-keystore", authority.trustStore().toString(), "-alias", "ca",
                "-file", authority.caPem().toString(), "-noprompt");
        return authority;
    }

    /** The authority's certificate as PEM: what clients trust. */
    public Path caPem() {
        return directory.resolve("ca.pem");
    }

    /** A PKCS#12 trust store holding only the authority's certificate. */
    public Path trustStore() {
        return directory.resolve("truststore.p12");
    }

    private Path caStore() {
        return directory.resolve("ca.p12");
    }

    /**
     * Issues a server certificate for the given subject alternative names.
     *
     * @param name a file name stem for the server, e.g. {@code postgres}
     * @param subjectAlternativeNames e.g. {@code ip:127.0.0.1}, {@code dns:localhost}: what a client
     *     that verifies the host name accepts
     * @return the certificate's files
     */
    public ServerCertificate issueServerCertificate(String name, String... subjectAlternativeNames) {
        Path keyStore = directory.resolve(name + ".p12");
        Path request = directory.resolve(name + ".csr");
        Path certificatePem = directory.resolve(name + ".crt");
        keytool("-genkeypair", "-keystore", keyStore.toString(), "-alias", "server", "-keyalg", "EC",
                "-groupname", "secp256r1", "-dname", "CN=" + name, "-validity", VALIDITY_DAYS);
        keytool("-certreq", "-keystore", keyStore.toString(), "-alias", "server", "-file", request.toString());
        keytool("-gencert", "-keystore", caStore().toString(), "-alias", "ca", "-infile", request.toString(),
                "-outfile", certificatePem.toString(), "-rfc", "-validity", VALIDITY_DAYS,
                "-ext", "SAN=" + String.join(",", subjectAlternativeNames),
                "-ext", "KU=digitalSignature,keyEncipherment", "-ext", "EKU=serverAuth,clientAuth");
        // the chain into the key store: the authority first, so that keytool accepts the signed reply
        keytool("-importcert", "-keystore", keyStore.toString(), "-alias", "ca", "-file", caPem().toString(),
                "-noprompt");
        keytool("-importcert", "-keystore", keyStore.toString(), "-alias", "server", "-file",
                certificatePem.toString(), "-noprompt");
        Path keyPem = directory.resolve(name + ".key");
        writePrivateKeyPem(keyStore, keyPem);
        return new ServerCertificate(keyStore, certificatePem, keyPem);
    }

    private static void writePrivateKeyPem(Path keyStore, Path keyPem) {
        try (InputStream in = Files.newInputStream(keyStore)) {
            KeyStore store = KeyStore.getInstance("PKCS12");
            store.load(in, STORE_PASSWORD.toCharArray());
            PrivateKey key = (PrivateKey) store.getKey("server", STORE_PASSWORD.toCharArray());
            String pem = "-----BEGIN PRIVATE KEY-----\n"
                    + Base64.getMimeEncoder(64, "\n".getBytes(StandardCharsets.US_ASCII)).encodeToString(key.getEncoded())
                    + "\n-----END PRIVATE KEY-----\n";
            Files.deleteIfExists(keyPem);
            Files.createFile(keyPem, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
            Files.writeString(keyPem, pem);
        } catch (IOException | GeneralSecurityException e) {
            throw new IllegalStateException("could not write the private key of " + keyStore, e);
        }
    }

    private void keytool(String... args) {
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "keytool").toString());
        command.addAll(List.of(args));
        command.addAll(List.of("-storetype", "PKCS12", "-storepass", STORE_PASSWORD));
        if (List.of(args).contains("-genkeypair")) {
            command.addAll(List.of("-keypass", STORE_PASSWORD));
        }
        Path output = directory.resolve("keytool.log");
        try {
            Process process = new ProcessBuilder(command).directory(directory.toFile())
                    .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.appendTo(output.toFile()))
                    .start();
            if (!process.waitFor(KEYTOOL_TIMEOUT.toSeconds(), TimeUnit.SECONDS)) {
                process.destroyForcibly();
                throw new IllegalStateException("keytool " + args[0] + " did not finish within " + KEYTOOL_TIMEOUT);
            }
            if (process.exitValue() != 0) {
                throw new IllegalStateException("keytool " + String.join(" ", args) + " exited with "
                        + process.exitValue() + ": " + Files.readString(output));
            }
        } catch (IOException e) {
            throw new IllegalStateException("could not run keytool", e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while keytool ran", e);
        }
    }

    /**
     * A server's certificate, signed by the authority.
     *
     * @param keyStore PKCS#12 with the key and chain under alias {@code server}, password {@link #STORE_PASSWORD}
     * @param certificatePem the certificate as PEM
     * @param privateKeyPem the unencrypted PKCS#8 key as PEM, mode 0600
     */
    public record ServerCertificate(Path keyStore, Path certificatePem, Path privateKeyPem) {}
}
