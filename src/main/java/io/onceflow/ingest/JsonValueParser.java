package io.onceflow.ingest;

import com.fasterxml.jackson.core.ErrorReportConfiguration;
import com.fasterxml.jackson.core.JacksonException;
import com.fasterxml.jackson.core.JsonFactoryBuilder;
import com.fasterxml.jackson.core.JsonLocation;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.exc.StreamConstraintsException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.Serializable;
import java.nio.CharBuffer;

/**
 * Parses one record value as exactly one JSON value within {@link JsonLimits}, or throws a
 * {@link Rejection} that says why not: {@code MALFORMED_JSON}, or {@code JSON_LIMIT_EXCEEDED}
 * naming the limit and its setting.
 */
final class JsonValueParser implements Serializable {
    private static final long serialVersionUID = 1L;

    private final JsonLimits limits;
    /** Created on first use: not serialisable, and Flink ships the deserializer to the tasks. */
    private transient ObjectMapper mapper;

    JsonValueParser(JsonLimits limits) {
        this.limits = limits;
    }

    /**
     * The parser of record values, with {@link #limits}. Jackson's error messages quote the
     * offending token, so that quote is bounded like ours.
     */
    private ObjectMapper mapper() {
        if (mapper == null) {
            mapper = new ObjectMapper(new JsonFactoryBuilder()
                    .streamReadConstraints(limits.constraints())
                    .errorReportConfiguration(ErrorReportConfiguration.builder()
                            .maxErrorTokenLength(Rejection.MAX_QUOTED_CHARS)
                            .build())
                    .build());
        }
        return mapper;
    }

    /** Parses exactly one JSON value; anything after it, even valid JSON, is malformed. */
    JsonNode parse(CharBuffer text) {
        ObjectMapper json = mapper();
        try (JsonParser parser =
                json.createParser(text.array(), text.arrayOffset() + text.position(), text.remaining())) {
            JsonNode root = json.readTree(parser);
            if (root == null) {
                throw new Rejection(
                        DeadLetterReason.MALFORMED_JSON, "the value is not JSON: it is empty or only white space");
            }
            if (parser.nextToken() != null) {
                throw new Rejection(
                        DeadLetterReason.MALFORMED_JSON,
                        "the value has content after its JSON value, at "
                                + position(parser.currentTokenLocation()));
            }
            return root;
        } catch (StreamConstraintsException e) {
            throw new Rejection(
                    DeadLetterReason.JSON_LIMIT_EXCEEDED,
                    "the value goes beyond a limit of the JSON parser, which stops there (raise "
                            + JsonLimits.settingNamedBy(e.getOriginalMessage()) + " to accept it): "
                            + e.getOriginalMessage() + ", at " + position(e.getLocation()));
        } catch (JacksonException e) {
            throw new Rejection(
                    DeadLetterReason.MALFORMED_JSON,
                    "the value is not valid JSON: " + e.getOriginalMessage() + ", at " + position(e.getLocation()));
        } catch (IOException e) {
            // Only JacksonExceptions can come from an in-memory source, but the API declares more.
            throw new Rejection(DeadLetterReason.MALFORMED_JSON, "the value could not be read as JSON: " + e);
        }
    }

    private static String position(JsonLocation location) {
        return location == null
                ? "an unknown position"
                : "line " + location.getLineNr() + ", column " + location.getColumnNr();
    }
}
