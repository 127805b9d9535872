package io.onceflow.api;

import com.fasterxml.jackson.core.StreamWriteFeature;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.cfg.JsonNodeFeature;
import com.fasterxml.jackson.databind.json.JsonMapper;

/**
 * JSON for a processor that reads, enriches and writes payloads without changing the numbers in
 * them: money in particular. Jackson's defaults read {@code 10.00} as a double, or, with big decimals
 * on, strip its trailing zeros in a tree and write it back as {@code 1E+1}; a mapper from {@link
 * #jsonMapper()} writes {@code 10.00} back as {@code 10.00}, {@code -0.50} as {@code -0.50}, and 30
 * digits as 30 digits. Only exponents change form: {@code 1e2} is written as {@code 100}.
 */
public final class Payloads {
    private Payloads() {}

    /**
     * A new mapper that keeps numbers as written: every non-integral number is read as a {@link
     * java.math.BigDecimal} (never a double), a tree keeps its scale ({@code 10.00} stays {@code
     * 10.00}), and it is written in plain notation, never as {@code 1E+1}. Build it once and keep it
     * (in a {@code static final} field): a mapper is thread-safe and costly to create.
     *
     * @return a new, independent mapper
     */
    public static JsonMapper jsonMapper() {
        return JsonMapper.builder()
                .enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
                .disable(JsonNodeFeature.STRIP_TRAILING_BIGDECIMAL_ZEROES)
                .enable(StreamWriteFeature.WRITE_BIGDECIMAL_AS_PLAIN)
                .build();
    }
}
