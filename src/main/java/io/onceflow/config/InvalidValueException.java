package io.onceflow.config;

/**
 * Thrown by a {@link ValueParsers} parser; {@link ConfigReader} turns it into one problem.
 * Unchecked so that parsers can be plain {@link java.util.function.Function}s.
 */
final class InvalidValueException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final String whatToDo;

    /**
     * @param whatIsWrong may quote the value; replaced by a neutral text for secret keys
     * @param whatToDo must not quote the value
     */
    InvalidValueException(String whatIsWrong, String whatToDo) {
        super(whatIsWrong);
        this.whatToDo = whatToDo;
    }

    String whatIsWrong() {
        return getMessage();
    }

    String whatToDo() {
        return whatToDo;
    }
}
