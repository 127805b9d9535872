package io.onceflow.ingest;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.apache.flink.util.InstantiationUtil;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.NullSource;
import org.junit.jupiter.params.provider.ValueSource;

class MessageIdSourceTest {

    @Test
    void parsesAHeader() {
        MessageIdSource source = MessageIdSource.parse("header:x-request-id");

        assertThat(source.kind()).isEqualTo(MessageIdSource.Kind.HEADER);
        assertThat(source.headerName()).isEqualTo("x-request-id");
        assertThat(source).hasToString("header:x-request-id");
    }

    @Test
    void theDefaultIsTheMessageIdHeader() {
        assertThat(MessageIdSource.DEFAULT.kind()).isEqualTo(MessageIdSource.Kind.HEADER);
        assertThat(MessageIdSource.DEFAULT.headerName()).isEqualTo("message-id");
        assertThat(MessageIdSource.DEFAULT).isEqualTo(MessageIdSource.parse(MessageIdSource.DEFAULT_SPEC));
    }

    @Test
    void parsesAJsonPointerWithEscapes() {
        MessageIdSource source = MessageIdSource.parse("json:/a~1b/c~0d");

        assertThat(source.kind()).isEqualTo(MessageIdSource.Kind.JSON_POINTER);
        assertThat(source.jsonPointer().getMatchingProperty()).isEqualTo("a/b");
        assertThat(source.jsonPointer().tail().getMatchingProperty()).isEqualTo("c~d");
        assertThat(source).hasToString("json:/a~1b/c~0d");
    }

    @Test
    void parsesTheKey() {
        assertThat(MessageIdSource.parse("key").kind()).isEqualTo(MessageIdSource.Kind.KEY);
    }

    @Test
    void isEqualByItsSpecAndSurvivesJavaSerialisation() throws Exception {
        MessageIdSource source = MessageIdSource.parse("json:/payment/id");

        assertThat(source)
                .isEqualTo(MessageIdSource.parse("json:/payment/id"))
                .isNotEqualTo(MessageIdSource.parse("json:/id"));
        MessageIdSource copy = InstantiationUtil.clone(source);
        assertThat(copy).isEqualTo(source);
        assertThat(copy.jsonPointer()).isEqualTo(source.jsonPointer());
    }

    @ParameterizedTest(name = "''{0}''")
    @NullSource
    @ValueSource(strings = {
        "", "KEY", "key ", "Header:message-id", "header", "header:", "header: ", "json:", "json:id", "json:/a~2b", "json:/a~",
        "message-id", "random"
    })
    void rejectsAnythingElseSayingWhatIsAllowed(String spec) {
        assertThatThrownBy(() -> MessageIdSource.parse(spec))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining(spec == null ? "null" : "'" + spec + "'")
                .hasMessageContaining("'header:<name>'")
                .hasMessageContaining("'json:<RFC 6901 JSON pointer>'")
                .hasMessageContaining("'key'");
    }

    @Test
    void saysWhatIsWrongWithABadPointer() {
        assertThatThrownBy(() -> MessageIdSource.parse("json:id")).hasMessageContaining("must start with '/'");
        assertThatThrownBy(() -> MessageIdSource.parse("json:/a~2b"))
                .hasMessageContaining("'~' at index 2 of the JSON pointer is not followed by '0' or '1'");
    }
}
