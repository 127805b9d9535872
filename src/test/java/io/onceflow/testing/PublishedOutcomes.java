package io.onceflow.testing;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.onceflow.tools.audit.CommittedTopicReader;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * What a results topic ({@code postgres.effect.results.topic}) holds for {@code read_committed}
 * readers: each id's published statuses, and every breach of its promise (an id published twice or
 * under another key, a source partition out of offset order, a decided effect not published).
 */
public final class PublishedOutcomes {
    private static final ObjectMapper JSON = new ObjectMapper();

    private final Map<String, List<String>> statusesById = new TreeMap<>();
    private final List<String> problems = new ArrayList<>();

    private PublishedOutcomes() {}

    /** Reads {@code topic} as committed now. */
    public static PublishedOutcomes read(String bootstrapServers, String topic, Duration timeout) {
        PublishedOutcomes published = new PublishedOutcomes();
        Map<String, Long> lastOffsetBySource = new HashMap<>();
        CommittedTopicReader.forBootstrapServers(bootstrapServers).read(topic, timeout, record -> {
            JsonNode outcome;
            try {
                outcome = JSON.readTree(record.value());
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            String id = outcome.path("id").asText();
            if (record.key() == null || !id.equals(new String(record.key(), StandardCharsets.UTF_8))) {
                published.problems.add("results topic: the record of id " + id + " is not keyed by it");
            }
            published.statusesById.computeIfAbsent(id, i -> new ArrayList<>()).add(outcome.path("status").asText());
            String source = outcome.path("topic").asText() + "/" + outcome.path("partition").asInt();
            long offset = outcome.path("offset").asLong();
            Long previous = lastOffsetBySource.put(source, offset);
            if (previous != null && previous >= offset) {
                published.problems.add("results topic: " + source + " offset " + offset + " (id " + id
                        + ") after offset " + previous);
            }
        });
        published.statusesById.forEach((id, statuses) -> {
            if (statuses.size() > 1) {
                published.problems.add("id " + id + ": " + statuses.size() + " outcomes published " + statuses);
            }
        });
        return published;
    }

    /** Each id's published statuses, in the order published. */
    public Map<String, List<String>> statusesById() {
        return statusesById;
    }

    /**
     * The breaches, given each decided effect's status by id (the events rows whose result is set):
     * the topic's own, and each decided effect not published or published with another status.
     */
    public List<String> problems(Map<String, String> decidedStatusById) {
        List<String> all = new ArrayList<>(problems);
        decidedStatusById.forEach((id, status) -> {
            List<String> statuses = statusesById.get(id);
            if (statuses == null) {
                all.add("id " + id + ": its effect's outcome (" + status + ") was not published");
            } else if (!statuses.get(statuses.size() - 1).equals(status)) {
                all.add("id " + id + ": published " + statuses + ", but its result says " + status);
            }
        });
        return all;
    }
}
