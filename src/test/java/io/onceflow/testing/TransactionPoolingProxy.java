package io.onceflow.testing;

import static io.onceflow.testing.ProxyServerConnection.body;
import static io.onceflow.testing.ProxyServerConnection.write;

import io.onceflow.sink.postgres.internal.PostgresConnections;
import io.onceflow.testing.TestPostgres.TestDatabase;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.Closeable;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * A test fixture that behaves, for the pgjdbc driver, like PgBouncer with {@code pool_mode =
 * transaction} (or {@code session}): no pooler ships as a Maven artifact, and the tests need one to
 * show that the sink refuses it. It listens on a local port and speaks the PostgreSQL wire protocol
 * (version 3) to its clients:
 *
 * <ul>
 *   <li>it answers each client's startup itself (no authentication, the server's ParameterStatus
 *       messages as the first server connection reported them, a made-up BackendKeyData, ReadyForQuery
 *       idle) and refuses SSL and GSS encryption ('N');
 *   <li>it opens its pool of server connections itself, with trust authentication (what the embedded
 *       server uses; other methods are refused at {@link #start});
 *   <li>{@link Pooling#TRANSACTION}: a client gets a server connection from the pool with its first
 *       message and gives it back when the server says ReadyForQuery idle ('I', outside a transaction)
 *       and has answered every Query and Sync the client sent; {@link Pooling#SESSION}: a client keeps
 *       its server connection until it leaves;
 *   <li>a client that leaves (Terminate, or a closed socket) while it holds a server connection had
 *       a session or transaction there: that connection is closed and a new one joins the pool
 *       (PgBouncer closes one left in a transaction, and resets one of session mode instead).
 * </ul>
 *
 * The pool hands out idle connections {@link Order#LIFO} (PgBouncer's default,
 * {@code server_round_robin = 0}) or {@link Order#FIFO} (round robin). Cancel requests are dropped,
 * server-side prepared statements do not survive a change of connection (use
 * {@code prepareThreshold=0}, as with PgBouncer: {@link #jdbcUrl()} does), and LISTEN is not relayed
 * reliably. Not thread-safe to {@link #close()} while a test still uses it.
 */
public final class TransactionPoolingProxy implements Closeable {
    /** When a client gives its server connection back. */
    public enum Pooling { TRANSACTION, SESSION }

    /** Which idle server connection the pool hands out next. */
    public enum Order { LIFO, FIFO }

    private static final int SSL_REQUEST = 80877103;
    private static final int GSS_REQUEST = 80877104;

    private final URI server;
    private final String user;
    private final Pooling pooling;
    private final Order order;
    private final ServerSocket listener;
    private final Deque<ProxyServerConnection> idle = new ArrayDeque<>();
    private final Set<Closeable> open = ConcurrentHashMap.newKeySet();
    private final ExecutorService threads = Executors.newCachedThreadPool(task -> {
        Thread thread = new Thread(task, "transaction-pooling-proxy");
        thread.setDaemon(true);
        return thread;
    });
    /** The ParameterStatus messages of the first server connection's startup, as sent to each client. */
    private byte[] parameterStatus;

    private TransactionPoolingProxy(URI server, String user, Pooling pooling, Order order) throws IOException {
        this.server = server;
        this.user = user;
        this.pooling = pooling;
        this.order = order;
        this.listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    }

    /** A proxy to {@code database} with {@code poolSize} server connections, opened now. */
    public static TransactionPoolingProxy start(TestDatabase database, int poolSize, Pooling pooling, Order order)
            throws IOException {
        // e.g. jdbc:postgresql://localhost:5432/onceflow_x?user=postgres
        TransactionPoolingProxy proxy = new TransactionPoolingProxy(URI.create(database.jdbcUrl().substring(5)),
                database.user(), pooling, order);
        for (int i = 0; i < poolSize; i++) {
            proxy.idle.add(proxy.openServerConnection());
        }
        proxy.threads.execute(proxy::accept);
        return proxy;
    }

    /** The URL that reaches the database through this proxy, with the server's user. */
    public String jdbcUrl() {
        return "jdbc:postgresql://127.0.0.1:" + listener.getLocalPort() + server.getPath() + "?user=" + user
                + "&prepareThreshold=0";
    }

    /** The pid of the server session that runs {@code connection}'s next statement. */
    public static int backendPid(Connection connection) throws SQLException {
        return PostgresConnections.backendPid(connection);
    }

    @Override
    public void close() throws IOException {
        listener.close();
        threads.shutdownNow();
        for (Closeable socket : open) {
            socket.close();
        }
    }

    private void accept() {
        while (!listener.isClosed()) {
            try {
                Socket client = listener.accept();
                open.add(client);
                threads.execute(() -> serve(client));
            } catch (IOException e) {
                return; // closed
            }
        }
    }

    private void serve(Socket socket) {
        Client client = null;
        try (socket) {
            DataInputStream in = new DataInputStream(new BufferedInputStream(socket.getInputStream()));
            DataOutputStream out = new DataOutputStream(new BufferedOutputStream(socket.getOutputStream()));
            if (!startup(in, out)) {
                return;
            }
            client = new Client(socket, out);
            for (int type = in.read(); type >= 0 && type != 'X'; type = in.read()) {
                client.forward(type, body(in));
            }
        } catch (IOException | InterruptedException e) {
            // the client went away: what it held is handled below
        } finally {
            open.remove(socket);
            if (client != null) {
                client.leave();
            }
        }
    }

    /** Answers the startup packets; false for a cancel request or an unknown protocol. */
    private boolean startup(DataInputStream in, DataOutputStream out) throws IOException {
        while (true) {
            int length = in.readInt();
            int code = in.readInt();
            in.readFully(new byte[length - 8]); // parameters: user and database are the proxy's own
            if (code == SSL_REQUEST || code == GSS_REQUEST) {
                out.write('N');
                out.flush();
                continue;
            }
            if (code != ProxyServerConnection.PROTOCOL_3) {
                return false; // a CancelRequest: not supported
            }
            write(out, 'R', new byte[4]); // AuthenticationOk
            out.write(parameterStatus);
            write(out, 'K', new byte[8]); // BackendKeyData: cancel requests are dropped anyway
            write(out, 'Z', new byte[] {'I'});
            out.flush();
            return true;
        }
    }

    private ProxyServerConnection openServerConnection() throws IOException {
        ProxyServerConnection connection = new ProxyServerConnection(server, user);
        open.add(connection);
        synchronized (this) {
            if (parameterStatus == null) {
                parameterStatus = connection.parameterStatus;
            }
        }
        return connection;
    }

    private ProxyServerConnection take() throws InterruptedException {
        synchronized (idle) {
            while (idle.isEmpty()) {
                idle.wait();
            }
            return idle.pollFirst();
        }
    }

    private void giveBack(ProxyServerConnection connection) {
        synchronized (idle) {
            if (order == Order.LIFO) {
                idle.addFirst(connection);
            } else {
                idle.addLast(connection);
            }
            idle.notifyAll();
        }
    }

    /** One client after its startup, and the server connection it holds, if any. */
    private final class Client {
        private final Socket socket;
        private final DataOutputStream out;
        private ProxyServerConnection server;
        /** Queries and Syncs sent to {@link #server} that it has not answered with ReadyForQuery yet. */
        private int unanswered;

        Client(Socket socket, DataOutputStream out) {
            this.socket = socket;
            this.out = out;
        }

        synchronized void forward(int type, byte[] body) throws IOException, InterruptedException {
            if (server == null) {
                ProxyServerConnection taken = take();
                server = taken;
                threads.execute(() -> relay(taken));
            }
            if (type == 'Q' || type == 'S' || type == 'F') {
                unanswered++;
            }
            write(server.out, type, body);
            server.out.flush();
        }

        /** Copies the server's messages to the client until the server connection goes back to the pool. */
        private void relay(ProxyServerConnection from) {
            try {
                while (true) {
                    int type = from.in.readByte();
                    byte[] body = body(from.in);
                    boolean giveBack = false;
                    if (type == 'Z') {
                        synchronized (this) {
                            unanswered--;
                            giveBack = pooling == Pooling.TRANSACTION && body[0] == 'I' && unanswered == 0;
                            if (giveBack) {
                                server = null;
                            }
                        }
                    }
                    if (giveBack) {
                        giveBack(from); // before the client sees ReadyForQuery and sends its next transaction
                    }
                    write(out, type, body);
                    out.flush();
                    if (giveBack) {
                        return;
                    }
                }
            } catch (IOException e) {
                try {
                    socket.close(); // the server connection broke, or the client left: leave() replaces it
                } catch (IOException ignored) {
                    // closing anyway
                }
            }
        }

        /** The client left: a server connection it still holds has its session or transaction, so it is replaced. */
        void leave() {
            ProxyServerConnection held;
            synchronized (this) {
                held = server;
                server = null;
            }
            if (held != null) {
                try {
                    open.remove(held);
                    held.close();
                    giveBack(openServerConnection());
                } catch (IOException e) {
                    // the proxy is closing, or the server is gone: the pool shrinks
                }
            }
        }
    }
}
