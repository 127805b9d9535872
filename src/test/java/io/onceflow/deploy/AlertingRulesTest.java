package io.onceflow.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import io.onceflow.job.Onceflow;
import io.onceflow.config.OnceflowConfig;
import io.onceflow.ingest.DeadLetterReason;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@code deploy/monitoring/onceflow-alerts.yaml} read as Prometheus reads it, against what a rule on a
 * dead job or on a duration gets wrong silently: a rule over a job's series says nothing when the series are
 * gone, and {@code humanizeDuration} takes seconds. Whether the names exist is PrometheusMetricsIT's (a real
 * scrape); what the alerts mean is docs/alerts.md's table, which must list exactly these alerts.
 */
class AlertingRulesTest {
    private static final Path MONITORING = Path.of("deploy", "monitoring");
    private static final Pattern METRIC = Pattern.compile("\\bflink_[A-Za-z0-9_]+");
    private static final Pattern ABSENT = Pattern.compile("absent\\(\\s*(flink_[A-Za-z0-9_]+)\\{job_name=~\"([^\"]+)\"}\\s*\\)");
    private static final Pattern UP = Pattern.compile("^up\\{job=~\"([^\"]+)\"}\\s*==\\s*0$");
    /** Flink's metrics in milliseconds: checkpoint durations, and the job's times (restartingTime, uptime...). */
    private static final Pattern MILLISECONDS = Pattern.compile("flink_[A-Za-z0-9_]+(Duration|Time|Ms|uptime|downtime)\\b");
    /** The job-level and operator-level scopes: a dead job's series vanish scope by scope. */
    private static final List<String> SCOPES = List.of("flink_jobmanager_job_", "flink_taskmanager_job_task_operator_");

    /** Alert name to its rule. */
    private static final Map<String, JsonNode> ALERTS = new LinkedHashMap<>();

    @BeforeAll
    static void readRules() throws IOException {
        JsonNode rules = new ObjectMapper(new YAMLFactory()).readTree(MONITORING.resolve("onceflow-alerts.yaml").toFile());
        for (JsonNode group : rules.path("groups")) {
            for (JsonNode rule : group.path("rules")) {
                assertThat(ALERTS.put(rule.path("alert").asText(), rule)).as("alert %s appears twice", rule.path("alert")).isNull();
            }
        }
        assertThat(ALERTS).isNotEmpty();
    }

    private static String expr(JsonNode rule) {
        return rule.path("expr").asText().strip().replaceAll("\\s+", " ");
    }

    /**
     * A rule that fires on missing progress ({@code increase(...) == 0}) compares nothing once the job is
     * gone; another rule must fire on the absence of that scope's series.
     */
    @Test
    void everyRuleOnMissingProgressHasAnAbsentRuleForItsSeries() {
        Set<String> absentScopes = new TreeSet<>();
        ALERTS.values().forEach(rule -> {
            Matcher absent = ABSENT.matcher(expr(rule));
            while (absent.find()) {
                SCOPES.stream().filter(absent.group(1)::startsWith).forEach(absentScopes::add);
            }
        });
        List<String> uncovered = new ArrayList<>();
        ALERTS.forEach((name, rule) -> {
            if (expr(rule).matches(".*==\\s*0$") && !expr(rule).startsWith("up")) {
                Matcher metric = METRIC.matcher(expr(rule));
                while (metric.find()) {
                    String scope = SCOPES.stream().filter(metric.group()::startsWith).findFirst().orElse(metric.group());
                    if (!absentScopes.contains(scope)) {
                        uncovered.add(name + ": " + metric.group());
                    }
                }
            }
        });

        assertThat(absentScopes).as("absent() rules over the job's series").isNotEmpty();
        assertThat(uncovered).as("rules on missing progress without an absent() rule over the same scope").isEmpty();
    }

    /** absent() with a job_name selector fires forever if the selector cannot match the name the job registers. */
    @Test
    void theAbsentRulesMatchTheNameTheJobRegisters() {
        String jobName = Onceflow.jobName(OnceflowConfig.fromMap(Map.of("kafka.bootstrap.servers", "kafka:9092",
                "input.topics", "payments,refunds", "input.group.id", "g", "output.topic", "payments-out",
                "dead.letter.topic", "dlq", "kafka.transactional.id.prefix", "p"), Map.of()));
        List<String> selectors = new ArrayList<>();
        ALERTS.values().forEach(rule -> {
            Matcher absent = ABSENT.matcher(expr(rule));
            while (absent.find()) {
                selectors.add(absent.group(2));
            }
        });

        assertThat(selectors).isNotEmpty().allSatisfy(selector -> assertThat(jobName).matches(selector));
    }

    /** A JobManager or TaskManager that cannot be scraped: its target's up is 0, for every scrape job we ship. */
    @Test
    void theUpRuleCoversEveryScrapeJobShipped() throws IOException {
        List<String> upSelectors = ALERTS.values().stream().map(AlertingRulesTest::expr).map(UP::matcher)
                .filter(Matcher::matches).map(up -> up.group(1)).toList();
        List<String> scrapeJobs = new ArrayList<>();
        new ObjectMapper(new YAMLFactory()).readTree(MONITORING.resolve("prometheus.yml").toFile()).path("scrape_configs")
                .forEach(job -> scrapeJobs.add(job.path("job_name").asText()));
        // the Prometheus Operator names a PodMonitor's scrape job "<namespace>/<name>"
        String podMonitor = new ObjectMapper(new YAMLFactory())
                .readTree(Path.of("deploy", "kubernetes", "podmonitor.yaml").toFile()).path("metadata").path("name").asText();
        scrapeJobs.add("payments/" + podMonitor);

        assertThat(upSelectors).as("rules of the form up{job=~\"...\"} == 0").hasSize(1);
        assertThat(scrapeJobs).allSatisfy(job -> assertThat(job).matches(upSelectors.get(0)));
    }

    /**
     * humanizeDuration reads its value as seconds (60 s of milliseconds as 60000 became "16h 40m 0s") and
     * writes the unit itself: a rule over a millisecond metric divides it by 1000, and no unit follows.
     */
    @Test
    void durationsAreHumanizedFromSecondsWithoutAUnitAppended() {
        List<String> wrong = new ArrayList<>();
        ALERTS.forEach((name, rule) -> {
            String annotations = rule.path("annotations").toString();
            if (!annotations.contains("humanizeDuration")) {
                return;
            }
            if (Pattern.compile("humanizeDuration\\s*}}\\s*[a-zµ]").matcher(annotations).find()) {
                wrong.add(name + ": a unit after humanizeDuration");
            }
            Matcher milliseconds = MILLISECONDS.matcher(expr(rule));
            while (milliseconds.find()) {
                if (!expr(rule).substring(milliseconds.end()).matches("^\\s*/\\s*1000\\b.*")) {
                    wrong.add(name + ": " + milliseconds.group() + " (milliseconds) is not divided by 1000");
                }
            }
        });

        assertThat(wrong).isEmpty();
    }

    /**
     * A processor's filter records go to the dead-letter topic too, one per event it drops on purpose, so
     * a processor that filters most of a stream would keep a rule over every reason firing: each rule on
     * the dead-letter counter leaves that reason out, by the code the job gives it.
     */
    @Test
    void rulesOnDeadLettersLeaveOutFilteredEvents() {
        Pattern deadLetters = Pattern.compile("reason_deadLetters(\\{[^}]*})?");
        String filtered = "reason!=\"" + DeadLetterReason.FILTERED_BY_PROCESSOR.name() + "\"";
        List<String> counting = new ArrayList<>();
        ALERTS.forEach((name, rule) -> {
            Matcher selector = deadLetters.matcher(expr(rule));
            while (selector.find()) {
                if (selector.group(1) == null || !selector.group(1).contains(filtered)) {
                    counting.add(name + ": " + selector.group());
                }
            }
        });

        assertThat(ALERTS.values()).as("a rule on dead letters").anySatisfy(rule ->
                assertThat(expr(rule)).contains("reason_deadLetters"));
        assertThat(counting).as("rules that count filtered events as dead letters").isEmpty();
    }

    /** Each alert's threshold is stated in the rule; the docs' table names every alert, and only those. */
    @Test
    void theAlertsPageListsExactlyTheseAlerts() throws IOException {
        String guide = Files.readString(Path.of("docs", "alerts.md"));
        Set<String> documented = new TreeSet<>();
        Matcher row = Pattern.compile("(?m)^\\| ((?:`Onceflow[A-Za-z]+`(?:, )?)+)").matcher(guide);
        while (row.find()) {
            Matcher name = Pattern.compile("`(Onceflow[A-Za-z]+)`").matcher(row.group(1));
            while (name.find()) {
                documented.add(name.group(1));
            }
        }

        assertThat(documented).containsExactlyInAnyOrderElementsOf(ALERTS.keySet());
    }
}
