package io.onceflow.config;

import org.apache.flink.annotation.Internal;

/**
 * Thrown by a parser of a setting's value (a {@link ValueParsers} parser, or the job's check of
 * {@code processor.class}); {@link ConfigReader} turns it into one problem. Unchecked so that
 * parsers can be plain {@link java.util.function.Function}s.
 */
@Internal
public final class InvalidValueException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final String whatToDo;

    /**
     * @param whatIsWrong may quote the value; replaced by a neutral text for secret keys
     * @param whatToDo must not quote the value
     */
    public InvalidValueException(String whatIsWrong, String whatToDo) {
        super(whatIsWrong);
        this.whatToDo = whatToDo;
    }

    /** What is wrong with the value; may quote it. */
    public String whatIsWrong() {
        return getMessage();
    }

    /** What to do about it; never quotes the value. */
    public String whatToDo() {
        return whatToDo;
    }
}
