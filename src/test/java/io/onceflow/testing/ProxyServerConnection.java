package io.onceflow.testing;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.ByteArrayOutputStream;
import java.io.Closeable;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.Socket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.TimeZone;

/**
 * A server connection of {@link TransactionPoolingProxy}, opened and authenticated by the proxy
 * itself (trust authentication only), and the framing of the wire protocol's messages: a type
 * byte, then the length (itself included) and the body.
 */
final class ProxyServerConnection implements Closeable {
    static final int PROTOCOL_3 = 196608;

    final DataInputStream in;
    final DataOutputStream out;
    /** The ParameterStatus messages of its startup, as the proxy sends them to its clients. */
    final byte[] parameterStatus;
    private final Socket socket;

    /** @param server {@code postgresql://host:port/database} */
    ProxyServerConnection(URI server, String user) throws IOException {
        socket = new Socket(server.getHost(), server.getPort());
        in = new DataInputStream(new BufferedInputStream(socket.getInputStream()));
        out = new DataOutputStream(new BufferedOutputStream(socket.getOutputStream()));
        ByteArrayOutputStream startup = new ByteArrayOutputStream();
        DataOutputStream parameters = new DataOutputStream(startup);
        parameters.writeInt(PROTOCOL_3);
        // what pgjdbc itself asks for, so that the ParameterStatus values suit it
        for (String parameter : new String[] {"user", user, "database", server.getPath().substring(1),
                "client_encoding", "UTF8", "DateStyle", "ISO", "TimeZone", TimeZone.getDefault().getID(),
                "extra_float_digits", "3", "application_name", "transaction-pooling-proxy"}) {
            parameters.write(parameter.getBytes(StandardCharsets.UTF_8));
            parameters.write(0);
        }
        parameters.write(0);
        out.writeInt(startup.size() + 4);
        out.write(startup.toByteArray());
        out.flush();
        ByteArrayOutputStream status = new ByteArrayOutputStream();
        for (int type = in.readByte(); type != 'Z'; type = in.readByte()) {
            byte[] body = body(in);
            if (type == 'R' && body[3] != 0) {
                socket.close();
                throw new IOException("the server asks for authentication method " + body[3]
                        + ": the proxy supports trust only (the embedded server's)");
            }
            if (type == 'E') {
                socket.close();
                throw new IOException("the server refused the proxy: "
                        + new String(body, StandardCharsets.UTF_8).replace('\0', ' '));
            }
            if (type == 'S') {
                write(new DataOutputStream(status), type, body);
            }
        }
        body(in);
        parameterStatus = status.toByteArray();
    }

    static byte[] body(DataInputStream in) throws IOException {
        byte[] body = new byte[in.readInt() - 4];
        in.readFully(body);
        return body;
    }

    static void write(DataOutputStream out, int type, byte[] body) throws IOException {
        out.write(type);
        out.writeInt(body.length + 4);
        out.write(body);
    }

    @Override
    public void close() throws IOException {
        socket.close();
    }
}
