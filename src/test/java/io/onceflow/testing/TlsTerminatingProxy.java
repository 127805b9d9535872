package io.onceflow.testing;

import io.onceflow.testing.TestCertificates.ServerCertificate;
import java.io.Closeable;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.nio.file.Files;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLSocket;

/**
 * What a pooler or load balancer that ends TLS looks like to pgjdbc: it accepts the client's TLS
 * (answers its SSLRequest 'S' and presents a certificate of a {@link TestCertificates} authority) and
 * relays the rest in plain text to a server without TLS. The client's {@code sslmode=verify-full}
 * succeeds while the server's session is unencrypted: what the preflight's look at {@code
 * pg_stat_ssl} must catch. One server connection per client connection; daemon threads.
 */
public final class TlsTerminatingProxy implements Closeable {
    private static final int SSL_REQUEST = 80877103;

    private final ServerSocket listener;
    private final SSLContext tls;
    private final URI server;

    private TlsTerminatingProxy(ServerSocket listener, SSLContext tls, URI server) {
        this.listener = listener;
        this.tls = tls;
        this.server = server;
    }

    /** Listens on 127.0.0.1 with {@code certificate}, relaying to {@code database}'s server. */
    public static TlsTerminatingProxy start(ServerCertificate certificate, TestPostgres.TestDatabase database)
            throws IOException, GeneralSecurityException {
        KeyStore keys = KeyStore.getInstance("PKCS12");
        try (InputStream in = Files.newInputStream(certificate.keyStore())) {
            keys.load(in, TestCertificates.STORE_PASSWORD.toCharArray());
        }
        KeyManagerFactory keyManagers = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        keyManagers.init(keys, TestCertificates.STORE_PASSWORD.toCharArray());
        SSLContext tls = SSLContext.getInstance("TLS");
        tls.init(keyManagers.getKeyManagers(), null, null);
        TlsTerminatingProxy proxy = new TlsTerminatingProxy(new ServerSocket(0, 50, InetAddress.getLoopbackAddress()),
                tls, URI.create(database.jdbcUrl().substring("jdbc:".length())));
        daemon(proxy::acceptLoop);
        return proxy;
    }

    /** {@code database}'s URL through this proxy, with {@code sslmode=verify-full} and the authority's root certificate. */
    public String jdbcUrl(TestPostgres.TestDatabase database, TestCertificates authority) {
        return "jdbc:postgresql://127.0.0.1:" + listener.getLocalPort() + URI.create(database.jdbcUrl()
                .substring("jdbc:".length())).getPath() + "?sslmode=verify-full&sslrootcert=" + authority.caPem();
    }

    private void acceptLoop() {
        while (!listener.isClosed()) {
            try {
                Socket client = listener.accept();
                daemon(() -> relay(client));
            } catch (IOException e) {
                return; // closed
            }
        }
    }

    private void relay(Socket client) {
        try (client) {
            DataInputStream in = new DataInputStream(client.getInputStream());
            int length = in.readInt();
            if (length != 8 || in.readInt() != SSL_REQUEST) {
                return; // a client that does not ask for TLS first has no business here
            }
            client.getOutputStream().write('S');
            client.getOutputStream().flush();
            SSLSocket secured = (SSLSocket) tls.getSocketFactory().createSocket(client, null, client.getPort(), false);
            secured.setUseClientMode(false);
            try (Socket plain = new Socket(server.getHost(), server.getPort())) {
                daemon(() -> pump(secured, plain));
                pump(plain, secured);
            }
        } catch (IOException e) {
            // the client or the server left: the relay ends with them
        }
    }

    private static void pump(Socket from, Socket to) {
        try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
            in.transferTo(out);
        } catch (IOException e) {
            // one side closed
        }
    }

    private static void daemon(Runnable task) {
        Thread thread = new Thread(task, "tls-terminating-proxy");
        thread.setDaemon(true);
        thread.start();
    }

    @Override
    public void close() throws IOException {
        listener.close();
    }
}
