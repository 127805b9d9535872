package io.onceflow.config;

import static io.onceflow.config.ConfigException.problem;

import java.io.IOException;
import java.io.Reader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

/**
 * Settings from {@code --key value} arguments, on top of the properties file named by {@code
 * --config FILE} if any, and the problems found reading them.
 */
record CommandLine(Map<String, String> settings, List<String> problems) {
    private static final String CONFIG_FILE_OPTION = "config";

    static CommandLine parse(String[] args) {
        List<String> problems = new ArrayList<>();
        Map<String, String> fromArguments = new LinkedHashMap<>();
        int index = 0;
        while (index < args.length) {
            String argument = args[index];
            if (!argument.startsWith("--") || argument.length() == 2) {
                // Not quoted: a stray value could be a secret whose key was forgotten.
                problems.add(
                        problem(
                                "command line",
                                "argument " + (index + 1) + " is not a --key",
                                "Pass settings as --key value pairs."));
                index++;
                continue;
            }
            String key = argument.substring(2);
            if (index + 1 == args.length) {
                problems.add(
                        problem(key, "has no value", "Pass it as --" + key + " followed by a value."));
                break;
            }
            if (fromArguments.putIfAbsent(key, args[index + 1]) != null) {
                problems.add(problem(key, "is given more than once", "Give it once."));
            }
            index += 2;
        }

        Map<String, String> settings = new HashMap<>();
        String configFile = fromArguments.remove(CONFIG_FILE_OPTION);
        if (configFile != null) {
            settings.putAll(readPropertiesFile(configFile, problems));
        }
        settings.putAll(fromArguments);
        return new CommandLine(Map.copyOf(settings), List.copyOf(problems));
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
