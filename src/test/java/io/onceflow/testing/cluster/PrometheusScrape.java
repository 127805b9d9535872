package io.onceflow.testing.cluster;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The samples one Prometheus reporter endpoint ({@code /metrics}, the text exposition format) served
 * at one moment, as Prometheus itself would read them.
 */
public final class PrometheusScrape {
    /** {@code name{labels} value}, the labels optional; a value may be NaN or ±Inf. */
    private static final Pattern SAMPLE = Pattern.compile("([a-zA-Z_:][a-zA-Z0-9_:]*)(\\{(.*)})?\\s+(\\S+)");
    private static final Pattern LABEL = Pattern.compile("([a-zA-Z_][a-zA-Z0-9_]*)=\"((?:[^\"\\\\]|\\\\.)*)\"");

    /** One sample: its labels and its value. */
    public record Sample(Map<String, String> labels, double value) {}

    private final Map<String, List<Sample>> samplesByName;
    private final Set<String> names;

    private PrometheusScrape(Map<String, List<Sample>> samplesByName) {
        this.samplesByName = samplesByName;
        this.names = Collections.unmodifiableSet(new TreeSet<>(samplesByName.keySet()));
    }

    /** A scrape of nothing, e.g. of an endpoint that is not up yet. */
    public static PrometheusScrape empty() {
        return new PrometheusScrape(Map.of());
    }

    /** Reads {@code http://127.0.0.1:port/metrics}. */
    public static PrometheusScrape of(int port) throws IOException {
        HttpRequest request = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/metrics"))
                .timeout(Duration.ofSeconds(10)).build();
        try {
            HttpResponse<String> response = HttpClient.newHttpClient().send(request, HttpResponse.BodyHandlers.ofString());
            if (response.statusCode() != 200) {
                throw new IOException("GET /metrics on port " + port + " answered " + response.statusCode());
            }
            return parse(response.body());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted", e);
        }
    }

    static PrometheusScrape parse(String exposition) {
        Map<String, List<Sample>> samples = new LinkedHashMap<>();
        for (String line : exposition.split("\n")) {
            if (line.isBlank() || line.startsWith("#")) {
                continue;
            }
            Matcher sample = SAMPLE.matcher(line.strip());
            if (!sample.matches()) {
                throw new IllegalArgumentException("not a Prometheus sample line: " + line);
            }
            Map<String, String> labels = new LinkedHashMap<>();
            if (sample.group(3) != null) {
                Matcher label = LABEL.matcher(sample.group(3));
                while (label.find()) {
                    labels.put(label.group(1), label.group(2));
                }
            }
            samples.computeIfAbsent(sample.group(1), name -> new ArrayList<>())
                    .add(new Sample(labels, Double.parseDouble(sample.group(4))));
        }
        return new PrometheusScrape(samples);
    }

    /** This scrape and {@code other} together, e.g. a JobManager's and a TaskManager's. */
    public PrometheusScrape and(PrometheusScrape other) {
        Map<String, List<Sample>> merged = new LinkedHashMap<>();
        samplesByName.forEach((name, samples) -> merged.put(name, new ArrayList<>(samples)));
        other.samplesByName.forEach((name, samples) -> merged.computeIfAbsent(name, n -> new ArrayList<>()).addAll(samples));
        return new PrometheusScrape(merged);
    }

    /** The metric names, sorted. */
    public Set<String> names() {
        return names;
    }

    public List<Sample> samples(String name) {
        return samplesByName.getOrDefault(name, List.of());
    }

    /** The sum of a metric's samples over all its label sets (subtasks, operators), 0 if absent. */
    public double sum(String name) {
        return samples(name).stream().mapToDouble(Sample::value).filter(Double::isFinite).sum();
    }
}
