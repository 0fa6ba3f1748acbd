package io.pricestream.flink;

import java.io.IOException;
import java.util.Map;

/**
 * The typed {@code pipelines.job_specs.sink_spec} of {@link SinkJob}: the brokers, each view's
 * features and each group's views (to split a group's row per view), the producers' common
 * properties and the three Kafka targets. Read once, through {@link SpecNode}: a missing or mistyped
 * field fails at submission, named.
 */
final class SinkSpec {
    static final String NAME = "sink spec";

    final String bootstrap;
    /** Each view's features, in the order of its rows. */
    final Map<String, String[]> views;
    /** A group's views, in the order of its row's features. */
    final Map<String, String[]> groups;
    /** Properties of every producer (SASL and TLS on a secure stack). */
    final Map<String, String> properties;
    final Target features;
    final Target dlq;
    /** The accepted-events topic, or null when the job writes none. */
    final Target accepted;

    /** One Kafka topic the job writes, and how. */
    static final class Target {
        final String topic;
        final String delivery;
        final String transactionalIdPrefix;
        /** Producer properties of this target, over the common ones. */
        final Map<String, String> properties;

        private Target(SpecNode node) {
            topic = node.text("topic");
            delivery = node.text("delivery");
            transactionalIdPrefix = node.text("transactional_id_prefix");
            properties = node.textMembers("properties");
        }
    }

    private SinkSpec(SpecNode root) {
        bootstrap = root.text("bootstrap");
        views = root.textArrayMembers("views");
        groups = root.textArrayMembers("groups");
        properties = root.textMembers("properties");
        features = new Target(root.object("features"));
        dlq = new Target(root.object("dlq"));
        SpecNode events = root.nullableObject("accepted");
        accepted = events == null ? null : new Target(events);
    }

    static SinkSpec parse(String json) throws IOException {
        return new SinkSpec(SpecNode.parse(NAME, json));
    }
}
