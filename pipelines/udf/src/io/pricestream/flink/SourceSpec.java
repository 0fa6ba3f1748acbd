package io.pricestream.flink;

import java.io.IOException;
import java.util.List;
import java.util.Map;

/**
 * The typed {@code pipelines.job_specs.source_spec} of {@link SourceJob}: the Kafka source, its start
 * and bound, the watermarks, the allowed lateness, the contract spec and the columns of a valid row.
 * Read once, through {@link SpecNode}: a missing or mistyped field fails at submission, named.
 */
final class SourceSpec {
    static final String NAME = "source spec";

    final String bootstrap;
    final String topic;
    final String groupId;
    final Map<String, String> properties;
    /** earliest-offset, latest-offset or group-offsets. */
    final String startup;
    final boolean bounded;
    final long outOfOrdernessMs;
    final long idleTimeoutMs;
    /** on-event or on-periodic. */
    final String watermarkEmit;
    final long allowedLatenessMs;
    final String lateReason;
    /** The contract spec, encoded as {@link ParseEvent#configure} takes it. */
    final String contract;
    final List<String> columns;
    /** Whether the valid events also go to the accepted-events output. */
    final boolean accepted;

    private SourceSpec(SpecNode root) {
        bootstrap = root.text("bootstrap");
        topic = root.text("topic");
        groupId = root.text("group_id");
        properties = root.textMembers("properties");
        startup = root.text("startup");
        bounded = root.flag("bounded");
        outOfOrdernessMs = root.integer("out_of_orderness_ms");
        idleTimeoutMs = root.integer("idle_timeout_ms");
        watermarkEmit = root.text("watermark_emit");
        allowedLatenessMs = root.integer("allowed_lateness_ms");
        lateReason = root.text("late_reason");
        contract = root.text("contract");
        columns = root.texts("columns");
        accepted = root.flag("accepted");
    }

    static SourceSpec parse(String json) throws IOException {
        return new SourceSpec(SpecNode.parse(NAME, json));
    }
}
