package io.onceflow.deploy;

import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import javax.xml.parsers.DocumentBuilderFactory;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.GlobalConfiguration;
import org.w3c.dom.Document;
import org.w3c.dom.Element;

/**
 * What the deployment files are checked against: the build's facts from {@code pom.xml} and the cluster
 * configuration {@code flink-conf/config.yaml} as Flink reads it. Tests run in the repository's root.
 */
final class ProjectFiles {
    private static Document pom;

    private ProjectFiles() {}

    /** {@code flink-conf/config.yaml} as Flink 2.2 loads it. */
    static Configuration clusterConfig() {
        return GlobalConfiguration.loadConfiguration(Path.of("flink-conf").toString());
    }

    /** The {@code <properties>} of {@code pom.xml}, e.g. {@code flink.version}. */
    static Map<String, String> pomProperties() {
        return properties(pom());
    }

    /** The {@code <properties>} of another project's pom, e.g. {@code examples/payments-ledger/pom.xml}. */
    static Map<String, String> pomProperties(Path pomFile) {
        return properties(parse(pomFile));
    }

    private static Map<String, String> properties(Document pom) {
        Map<String, String> properties = new HashMap<>();
        Element element = (Element) pom.getElementsByTagName("properties").item(0);
        for (var node = element.getFirstChild(); node != null; node = node.getNextSibling()) {
            if (node instanceof Element property) {
                properties.put(property.getTagName(), property.getTextContent().strip());
            }
        }
        return properties;
    }

    /** The project's own version (not a dependency's). */
    static String projectVersion() {
        return projectChild("version");
    }

    /** The file name of the job jar that {@code mvn package} builds: the shade plugin's attached artifact. */
    static String jobJarName() {
        return projectChild("artifactId") + "-" + projectVersion() + "-" + firstText("shadedClassifierName") + ".jar";
    }

    /** The job jar's main class, as the shade plugin writes it into the manifest. */
    static String jobMainClass() {
        return firstText("mainClass");
    }

    private static String projectChild(String name) {
        for (var node = pom().getDocumentElement().getFirstChild(); node != null; node = node.getNextSibling()) {
            if (node instanceof Element child && child.getTagName().equals(name)) {
                return child.getTextContent().strip();
            }
        }
        throw new AssertionError("pom.xml has no <" + name + "> of its own");
    }

    private static String firstText(String tag) {
        var nodes = pom().getElementsByTagName(tag);
        if (nodes.getLength() == 0) {
            throw new AssertionError("pom.xml has no <" + tag + ">");
        }
        return nodes.item(0).getTextContent().strip();
    }

    private static synchronized Document pom() {
        if (pom == null) {
            pom = parse(Path.of("pom.xml"));
        }
        return pom;
    }

    private static Document parse(Path pomFile) {
        try {
            return DocumentBuilderFactory.newInstance().newDocumentBuilder().parse(pomFile.toFile());
        } catch (Exception e) {
            throw new AssertionError("cannot read " + pomFile, e);
        }
    }
}
