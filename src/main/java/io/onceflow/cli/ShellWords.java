package io.onceflow.cli;

import java.util.regex.Pattern;
import org.apache.flink.annotation.Internal;

/**
 * Quotes text for a POSIX shell, for the commands onceflow prints for an operator to run (the
 * resume command, a {@code kafka-acls.sh} grant): a value taken from the settings must stay one
 * argument, whatever characters it holds, and never become shell syntax on the operator's machine.
 */
@Internal
public final class ShellWords {
    /** Text made only of these characters needs no quotes in a POSIX shell. */
    private static final Pattern NEEDS_NO_QUOTES = Pattern.compile("[A-Za-z0-9_./:=@%+,-]+");

    private ShellWords() {}

    /**
     * Returns {@code text} as one shell word: as it is when it needs no quotes, else in single quotes
     * (each {@code '} written as {@code '\''}).
     *
     * @param text any text
     * @return a word a POSIX shell reads back as {@code text}
     */
    public static String quoted(String text) {
        return NEEDS_NO_QUOTES.matcher(text).matches() ? text : "'" + text.replace("'", "'\\''") + "'";
    }
}
