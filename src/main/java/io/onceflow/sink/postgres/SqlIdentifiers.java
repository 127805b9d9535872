package io.onceflow.sink.postgres;

import java.util.regex.Pattern;
import org.apache.flink.annotation.Internal;

/**
 * Internal. Table names come from configuration and are put into SQL text (PostgreSQL cannot bind
 * identifiers as parameters), so only plain unquoted identifiers pass: nothing that could end a
 * name and start another statement.
 */
@Internal
final class SqlIdentifiers {
    private static final String PART = "[a-zA-Z_][a-zA-Z0-9_]{0,62}";
    private static final Pattern TABLE_NAME = Pattern.compile(PART + "(\\." + PART + ")?");

    private SqlIdentifiers() {}

    static boolean isTableName(String name) {
        return name != null && TABLE_NAME.matcher(name).matches();
    }

    /** Why {@code name} is rejected and what to use instead, for builder and schema messages. */
    static String tableNameProblem(String setting, String name) {
        return setting + " '" + name + "' is not a valid table name: use table or schema.table, each part a letter"
                + " or '_' followed by at most 62 letters, digits or '_' (unquoted, so PostgreSQL folds it to"
                + " lower case)";
    }

    static String requireTableName(String setting, String name) {
        if (!isTableName(name)) {
            throw new IllegalArgumentException(tableNameProblem(setting, name));
        }
        return name;
    }
}
