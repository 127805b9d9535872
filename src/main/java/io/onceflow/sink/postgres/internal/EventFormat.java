package io.onceflow.sink.postgres.internal;

import io.onceflow.api.Event;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import org.apache.flink.annotation.Internal;
import org.apache.flink.core.memory.DataInputView;
import org.apache.flink.core.memory.DataOutputView;

/**
 * An {@link Event} in the writer state (see {@link PostgresWriterStateSerializer}): every field,
 * spelled out, so that the savepoint format does not change with Flink's POJO serializer. Strings
 * and byte arrays are length-prefixed ({@code -1} for null): a message id or header may exceed the
 * 64 KB of {@code writeUTF}. The writer's spill file of held events uses it too.
 */
@Internal
final class EventFormat {
    private EventFormat() {}

    public static void write(Event event, DataOutputView out) throws IOException {
        writeBytes(utf8(event.messageId), out);
        writeBytes(event.payload, out);
        writeBytes(utf8(event.sourceTopic), out);
        out.writeInt(event.sourcePartition);
        out.writeLong(event.sourceOffset);
        out.writeLong(event.sourceTimestamp);
        Map<String, byte[]> headers = event.headers == null ? Map.of() : event.headers;
        out.writeInt(headers.size());
        for (Map.Entry<String, byte[]> header : headers.entrySet()) {
            writeBytes(utf8(header.getKey()), out);
            writeBytes(header.getValue(), out);
        }
        writeBytes(event.sourceKey, out);
    }

    public static Event read(DataInputView in) throws IOException {
        Event event = new Event();
        event.messageId = string(readBytes(in));
        event.payload = readBytes(in);
        event.sourceTopic = string(readBytes(in));
        event.sourcePartition = in.readInt();
        event.sourceOffset = in.readLong();
        event.sourceTimestamp = in.readLong();
        int headers = in.readInt();
        event.headers = new HashMap<>();
        for (int i = 0; i < headers; i++) {
            event.headers.put(string(readBytes(in)), readBytes(in));
        }
        event.sourceKey = readBytes(in);
        return event;
    }

    private static byte[] utf8(String text) {
        return text == null ? null : text.getBytes(StandardCharsets.UTF_8);
    }

    private static String string(byte[] utf8) {
        return utf8 == null ? null : new String(utf8, StandardCharsets.UTF_8);
    }

    private static void writeBytes(byte[] bytes, DataOutputView out) throws IOException {
        if (bytes == null) {
            out.writeInt(-1);
            return;
        }
        out.writeInt(bytes.length);
        out.write(bytes);
    }

    private static byte[] readBytes(DataInputView in) throws IOException {
        int length = in.readInt();
        if (length < -1) {
            throw new IOException("corrupt PostgreSQL sink writer state: a field of length " + length);
        }
        if (length == -1) {
            return null;
        }
        byte[] bytes = new byte[length];
        in.readFully(bytes);
        return bytes;
    }
}
