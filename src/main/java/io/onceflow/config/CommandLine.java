package io.onceflow.config;

import static io.onceflow.config.ConfigException.problem;

import java.io.IOException;
import java.io.Reader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

/**
 * Settings from {@code --key value} or {@code --key=value} arguments, on top of the properties
 * files named by {@code --config FILE} if any (each file's keys override those of the files before
 * it, e.g. a local overlay on the job's own file); the command's own flags (e.g. {@code --help}),
 * options (e.g. the audit's {@code --format}) and repeatable options (e.g. {@code --id} of {@code
 * effects retry-failed}, each value in the order given); and the problems found reading them.
 *
 * <p>No problem ever quotes a value, nor anything after the {@code =} of an argument: a value may
 * be a secret whose key was mistyped.
 */
record CommandLine(
        Map<String, String> settings,
        Set<String> flags,
        Map<String, String> commandOptions,
        Map<String, List<String>> repeatedOptions,
        List<String> problems) {
    private static final String CONFIG_FILE_OPTION = "config";
    /** Flags every command understands; {@code -h} is the only argument without {@code --}. */
    static final Set<String> HELP_ARGUMENTS = Set.of("--help", "-h");

    /**
     * @param flagNames the command's flags without {@code --}, e.g. {@code print-postgres-ddl}
     * @param optionNames the command's options that take a value, without {@code --}
     * @param repeatableNames the command's options that take a value and may be given more than once
     */
    static CommandLine parse(String[] args, Set<String> flagNames, Set<String> optionNames,
            Set<String> repeatableNames) {
        List<String> problems = new ArrayList<>();
        Map<String, String> fromArguments = new LinkedHashMap<>();
        Set<String> flags = new LinkedHashSet<>();
        Map<String, String> commandOptions = new LinkedHashMap<>();
        Map<String, List<String>> repeatedOptions = new LinkedHashMap<>();
        List<String> configFiles = new ArrayList<>();
        int index = 0;
        while (index < args.length) {
            String argument = args[index];
            int position = index + 1;
            if (HELP_ARGUMENTS.contains(argument)) {
                flags.add("help");
                index++;
                continue;
            }
            int equals = argument.indexOf('=');
            String key = argument.startsWith("--")
                    ? argument.substring(2, equals < 0 ? argument.length() : equals)
                    : "";
            if (key.isEmpty()) {
                // Not quoted: a stray value could be a secret whose key was forgotten.
                problems.add(
                        problem(
                                "command line",
                                "argument " + position + " is not a --key",
                                "Pass settings as --key value or --key=value."));
                index++;
                continue;
            }
            if (flagNames.contains(key)) {
                if (equals >= 0) {
                    problems.add(problem("--" + key, "takes no value", "Give it as --" + key + " alone."));
                }
                flags.add(key);
                index++;
                continue;
            }
            String value;
            if (equals >= 0) {
                value = argument.substring(equals + 1);
                index++;
            } else if (index + 1 < args.length) {
                value = args[index + 1];
                index += 2;
            } else {
                problems.add(
                        problem(key, "has no value", "Pass it as --" + key + " followed by a value."));
                break;
            }
            if (key.equals(CONFIG_FILE_OPTION)) {
                configFiles.add(value);
                continue;
            }
            if (repeatableNames.contains(key)) {
                repeatedOptions.computeIfAbsent(key, name -> new ArrayList<>()).add(value);
                continue;
            }
            Map<String, String> target = optionNames.contains(key) ? commandOptions : fromArguments;
            if (target.putIfAbsent(key, value) != null) {
                problems.add(problem(key, "is given more than once", "Give it once."));
            }
        }

        Map<String, String> settings = new HashMap<>();
        for (String configFile : configFiles) {
            settings.putAll(readPropertiesFile(configFile, problems));
        }
        settings.putAll(fromArguments);
        Map<String, List<String>> repeated = new LinkedHashMap<>();
        repeatedOptions.forEach((name, values) -> repeated.put(name, List.copyOf(values)));
        return new CommandLine(Map.copyOf(settings), Set.copyOf(flags), Map.copyOf(commandOptions),
                Map.copyOf(repeated), List.copyOf(problems));
    }

    private static Map<String, String> readPropertiesFile(String file, List<String> problems) {
        Properties properties = new Properties();
        // UTF-8 rather than Properties' ISO-8859-1 default for streams.
        try (Reader reader = Files.newBufferedReader(Path.of(file))) {
            properties.load(reader);
        } catch (IOException | IllegalArgumentException e) {
            problems.add(
                    problem(
                            "--" + CONFIG_FILE_OPTION,
                            "cannot read '" + file + "' (" + e + ")",
                            "Name a readable UTF-8 Java properties file."));
            return Map.of();
        }
        Map<String, String> settings = new HashMap<>();
        properties.stringPropertyNames()
                .forEach(key -> settings.put(key, properties.getProperty(key)));
        return settings;
    }
}
