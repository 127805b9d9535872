package io.onceflow.sink.postgres.options;

import java.util.regex.Pattern;
import org.apache.flink.annotation.Internal;

/**
 * Internal. Table and function names come from configuration and are put into SQL text (PostgreSQL
 * cannot bind identifiers as parameters), so only plain unquoted identifiers pass: nothing that
 * could end a name and start another statement.
 */
@Internal
public final class SqlIdentifiers {
    private static final String PART = "[a-zA-Z_][a-zA-Z0-9_]{0,62}";
    private static final Pattern QUALIFIED_NAME = Pattern.compile(PART + "(\\." + PART + ")?");

    private SqlIdentifiers() {}

    /** Whether {@code name} is {@code name} or {@code schema.name}, each part a plain identifier. */
    public static boolean isQualifiedName(String name) {
        return name != null && QUALIFIED_NAME.matcher(name).matches();
    }

    /** Why {@code name} is rejected and what to use instead, for builder and schema messages. */
    public static String tableNameProblem(String setting, String name) {
        return nameProblem(setting, name, "table");
    }

    /** As {@link #tableNameProblem}, for a function. */
    public static String functionNameProblem(String setting, String name) {
        return nameProblem(setting, name, "function");
    }

    private static String nameProblem(String setting, String name, String kind) {
        return setting + " '" + name + "' is not a valid " + kind + " name: use " + kind + " or schema." + kind
                + ", each part a letter or '_' followed by at most 62 letters, digits or '_' (unquoted, so"
                + " PostgreSQL folds it to lower case)";
    }

    public static String requireTableName(String setting, String name) {
        return require(name, tableNameProblem(setting, name));
    }

    public static String requireFunctionName(String setting, String name) {
        return require(name, functionNameProblem(setting, name));
    }

    private static String require(String name, String problem) {
        if (!isQualifiedName(name)) {
            throw new IllegalArgumentException(problem);
        }
        return name;
    }
}
