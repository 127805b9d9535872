package io.onceflow.ingest;

import com.fasterxml.jackson.core.JsonPointer;
import java.io.Serializable;

/**
 * Where the message id of a Kafka record is found: a record header, a JSON pointer into the record
 * value, or the record key.
 *
 * <p>The id is the deduplication key, so it must be the same on every redelivery of a message. A
 * record without one is dead-lettered; it is never given a generated id, which would turn each
 * redelivery into a new message.
 *
 * <p>Written as a spec string (see {@link #parse(String)}); {@link #toString()} gives it back.
 * Immutable.
 */
public final class MessageIdSource implements Serializable {
    private static final long serialVersionUID = 1L;

    private static final String HEADER_PREFIX = "header:";
    private static final String JSON_POINTER_PREFIX = "json:";
    private static final String KEY_SPEC = "key";
    private static final String ALLOWED_FORMS = "expected 'header:<name>' (e.g. 'header:message-id'), "
            + "'json:<RFC 6901 JSON pointer>' (e.g. 'json:/id', 'json:/payment/id') or 'key'";

    /** The spec of the default source, the {@code message-id} header. */
    public static final String DEFAULT_SPEC = "header:message-id";

    /** The default source: the {@code message-id} header. */
    public static final MessageIdSource DEFAULT = parse(DEFAULT_SPEC);

    /** The kinds of place an id can be found in. */
    enum Kind {
        HEADER,
        JSON_POINTER,
        KEY
    }

    private final String spec;
    private final Kind kind;
    /** The header name; null unless the kind is {@link Kind#HEADER}. */
    private final String headerName;
    /** The compiled pointer; null unless the kind is {@link Kind#JSON_POINTER}. */
    private final JsonPointer jsonPointer;
    /** Names the id in dead-letter messages, e.g. "the id in header 'message-id'". */
    private final String idDescription;

    private MessageIdSource(String spec, Kind kind, String headerName, JsonPointer jsonPointer, String idDescription) {
        this.spec = spec;
        this.kind = kind;
        this.headerName = headerName;
        this.jsonPointer = jsonPointer;
        this.idDescription = idDescription;
    }

    /**
     * Parses a spec: {@code header:<name>} (a record header; the last one wins if it is repeated),
     * {@code json:<pointer>} (an RFC 6901 JSON pointer into the record value, such as {@code /id}
     * or {@code /payment/id}, with {@code ~1} for '/' and {@code ~0} for '~' in member names) or
     * {@code key} (the record key). The spec is taken exactly as written: no trimming, no case
     * folding.
     *
     * @throws IllegalArgumentException if the spec is none of these forms; the message lists them
     */
    public static MessageIdSource parse(String spec) {
        if (spec == null) {
            throw invalid(null, "no spec given");
        }
        if (spec.equals(KEY_SPEC)) {
            return new MessageIdSource(spec, Kind.KEY, null, null, "the id in the record key");
        }
        if (spec.startsWith(HEADER_PREFIX)) {
            String name = spec.substring(HEADER_PREFIX.length());
            if (name.isBlank()) {
                throw invalid(spec, "the header name is empty or only white space");
            }
            return new MessageIdSource(spec, Kind.HEADER, name, null, "the id in header '" + name + "'");
        }
        if (spec.startsWith(JSON_POINTER_PREFIX)) {
            String pointer = spec.substring(JSON_POINTER_PREFIX.length());
            checkJsonPointer(spec, pointer);
            String description = "the id at JSON pointer '" + pointer + "'";
            return new MessageIdSource(spec, Kind.JSON_POINTER, null, JsonPointer.compile(pointer), description);
        }
        throw invalid(spec, "unknown form");
    }

    /**
     * Checks RFC 6901 syntax strictly: Jackson's compiler silently accepts a '~' that starts no
     * escape, which would make a typo point somewhere unexpected.
     */
    private static void checkJsonPointer(String spec, String pointer) {
        if (!pointer.startsWith("/")) {
            // The empty pointer is valid RFC 6901 but means the whole value, which is never an id.
            throw invalid(spec, "a JSON pointer must start with '/'");
        }
        for (int i = 0; i < pointer.length(); i++) {
            if (pointer.charAt(i) == '~') {
                char next = i + 1 < pointer.length() ? pointer.charAt(i + 1) : 0;
                if (next != '0' && next != '1') {
                    throw invalid(spec, "'~' at index " + i + " of the JSON pointer is not followed by '0' or '1'");
                }
            }
        }
    }

    private static IllegalArgumentException invalid(String spec, String problem) {
        String shown = spec == null ? "null" : "'" + spec + "'";
        return new IllegalArgumentException(
                shown + " is not a message id source (" + problem + "): " + ALLOWED_FORMS);
    }

    Kind kind() {
        return kind;
    }

    String headerName() {
        return headerName;
    }

    JsonPointer jsonPointer() {
        return jsonPointer;
    }

    String idDescription() {
        return idDescription;
    }

    /** Returns the spec this source was parsed from, e.g. {@code header:message-id}. */
    @Override
    public String toString() {
        return spec;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof MessageIdSource && spec.equals(((MessageIdSource) o).spec);
    }

    @Override
    public int hashCode() {
        return spec.hashCode();
    }
}
