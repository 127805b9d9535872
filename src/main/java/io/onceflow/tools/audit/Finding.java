package io.onceflow.tools.audit;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** A count of ids (or records) in one outcome or one problem of an {@link AuditReport}, with the first few as examples. */
final class Finding {
    /** How many example ids a finding lists; the counts are always complete. */
    static final int SAMPLE_SIZE = 10;

    long count;
    final List<String> examples = new ArrayList<>();

    void add(String id) {
        count++;
        if (examples.size() < SAMPLE_SIZE) {
            examples.add(id);
        }
    }

    Map<String, Object> toMap() {
        Map<String, Object> map = new LinkedHashMap<>();
        map.put("count", count);
        map.put("examples", examples);
        return map;
    }
}
