package io.onceflow.tools.audit;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * What an effect results topic ({@code postgres.effect.results.topic}) holds for {@code
 * read_committed} readers: each id's published statuses, and every breach of its promise. An
 * outcome is identified by its source partition and number ({@code seq}); it must be published once
 * (a re-driven effect's second outcome has a number of its own), each source partition's outcomes
 * in increasing number, each record keyed by its id, and every decided effect published with the
 * status its row records.
 */
public final class PublishedOutcomes {
    private static final ObjectMapper JSON = new ObjectMapper();

    private final Map<String, List<String>> statusesById = new TreeMap<>();
    private final List<String> problems = new ArrayList<>();
    private long records;

    private PublishedOutcomes() {}

    /** Reads {@code topic} as committed now. */
    public static PublishedOutcomes read(CommittedTopicReader reader, String topic, Duration timeout) {
        PublishedOutcomes published = new PublishedOutcomes();
        Map<String, Long> lastSeqBySource = new HashMap<>();
        Set<String> outcomes = new HashSet<>();
        reader.read(topic, timeout, record -> {
            published.records++;
            JsonNode outcome;
            try {
                outcome = JSON.readTree(record.value());
            } catch (IOException | RuntimeException e) {
                published.problems.add("results topic: the record at " + record.partition() + "/" + record.offset()
                        + " is not an outcome: " + e.getMessage());
                return;
            }
            String id = outcome.path("id").asText();
            if (record.key() == null || !id.equals(new String(record.key(), StandardCharsets.UTF_8))) {
                published.problems.add("results topic: the record of id " + id + " is not keyed by it");
            }
            published.statusesById.computeIfAbsent(id, i -> new ArrayList<>()).add(outcome.path("status").asText());
            String source = outcome.path("topic").asText() + "/" + outcome.path("partition").asInt();
            long seq = outcome.path("seq").asLong();
            if (!outcomes.add(source + "#" + seq)) {
                published.problems.add("id " + id + ": outcome " + seq + " of " + source + " published twice");
            }
            Long previous = lastSeqBySource.put(source, seq);
            if (previous != null && previous >= seq) {
                published.problems.add("results topic: " + source + " outcome " + seq + " (id " + id
                        + ") after outcome " + previous);
            }
        });
        return published;
    }

    /** As {@link #read(CommittedTopicReader, String, Duration)}, from the brokers at {@code bootstrapServers}. */
    public static PublishedOutcomes read(String bootstrapServers, String topic, Duration timeout) {
        return read(CommittedTopicReader.forBootstrapServers(bootstrapServers), topic, timeout);
    }

    /** Each id's published statuses, in the order published. */
    public Map<String, List<String>> statusesById() {
        return statusesById;
    }

    /** How many records the topic held. */
    public long records() {
        return records;
    }

    /**
     * The breaches, given the status each decided effect's row records ({@code applied}, {@code
     * rejected}, {@code failed}) by id: the topic's own, and each decided effect not published or
     * last published with another status.
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
