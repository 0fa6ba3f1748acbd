package io.pricestream.flink;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;

/**
 * Test harness of {@code tests/integration/test_job_spec_roundtrip.py}: each spec file (its kind
 * first: sink, source, tile, redis, contract) read by the job's typed reader, and its typed fields
 * written back as JSON, one line per file: {@code OK <json>}, or {@code ERROR <message>} where the
 * reader refused it.
 */
public final class JobSpecCheck {

    private static final ObjectMapper JSON = new ObjectMapper();

    private JobSpecCheck() {}

    public static void main(String[] args) throws Exception {
        String kind = args[0];
        for (int i = 1; i < args.length; i++) {
            String json = new String(Files.readAllBytes(Paths.get(args[i])), StandardCharsets.UTF_8);
            try {
                System.out.println("OK " + JSON.writeValueAsString(read(kind, json)));
            } catch (IllegalArgumentException e) {
                System.out.println("ERROR " + e.getMessage().replace('\n', ' '));
            }
        }
    }

    private static Object read(String kind, String json) throws Exception {
        switch (kind) {
            case "sink": return sink(SinkSpec.parse(json));
            case "source": return source(SourceSpec.parse(json));
            case "tile": return tile(TileSpec.parse(json));
            case "redis": return redis(RedisSinkSpec.parse(json));
            case "contract": return contract(new ContractRules(SpecNode.of("contract spec", JSON.readTree(json))));
            default:
                throw new IllegalStateException("kind " + kind + ", expected sink, source, tile, redis or contract");
        }
    }

    private static Map<String, Object> sink(SinkSpec s) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("bootstrap", s.bootstrap);
        out.put("views", s.views);
        out.put("groups", s.groups);
        out.put("properties", s.properties);
        out.put("features", target(s.features));
        out.put("dlq", target(s.dlq));
        out.put("accepted", s.accepted == null ? null : target(s.accepted));
        return out;
    }

    private static Map<String, Object> target(SinkSpec.Target t) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("topic", t.topic);
        out.put("delivery", t.delivery);
        out.put("transactional_id_prefix", t.transactionalIdPrefix);
        out.put("properties", t.properties);
        return out;
    }

    private static Map<String, Object> source(SourceSpec s) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("bootstrap", s.bootstrap);
        out.put("topic", s.topic);
        out.put("group_id", s.groupId);
        out.put("properties", s.properties);
        out.put("startup", s.startup);
        out.put("bounded", s.bounded);
        out.put("out_of_orderness_ms", s.outOfOrdernessMs);
        out.put("idle_timeout_ms", s.idleTimeoutMs);
        out.put("watermark_emit", s.watermarkEmit);
        out.put("allowed_lateness_ms", s.allowedLatenessMs);
        out.put("late_reason", s.lateReason);
        out.put("contract", s.contract);
        out.put("columns", s.columns);
        out.put("accepted", s.accepted);
        return out;
    }

    /** The tile spec as read: names where the reader holds column positions, each feature's partials by name. */
    private static Map<String, Object> tile(TileSpec s) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("columns", s.columns);
        out.put("flush_ms", s.flushMs);
        out.put("backlog_flush_ms", s.backlogFlushMs);
        out.put("backlog_lag_ms", s.backlogLagMs);
        out.put("horizon_ms", s.horizonMs);
        List<Object> groups = new ArrayList<>();
        for (TileSpec.Group g : s.groups) {
            Map<String, Object> group = new LinkedHashMap<>();
            group.put("name", g.name);
            List<String> keys = new ArrayList<>();
            for (int k : g.keyIdx) {
                keys.add(s.columns.get(k));
            }
            group.put("keys", keys);
            List<Object> views = new ArrayList<>();
            for (TileSpec.View v : g.views) {
                views.add(view(s, v));
            }
            group.put("views", views);
            group.put("feature_count", g.featureCount);
            groups.add(group);
        }
        out.put("groups", groups);
        return out;
    }

    private static Map<String, Object> view(TileSpec s, TileSpec.View v) {
        Map<String, Object> view = new LinkedHashMap<>();
        view.put("name", v.name);
        view.put("tile_ms", v.tileMs);
        view.put("window_ms", v.windowMs);
        view.put("rates", v.rates);
        List<String> partials = new ArrayList<>();
        for (TileSpec.Partial p : v.partials) {
            partials.add(partialName(s, p));
        }
        view.put("partials", partials);
        List<Object> features = new ArrayList<>();
        for (TileSpec.Feature f : v.features) {
            Map<String, Object> feature = new LinkedHashMap<>();
            feature.put("name", f.name);
            feature.put("agg", f.op);
            feature.put("sum", f.sum < 0 ? null : partials.get(f.sum));
            feature.put("n", f.count < 0 ? null : partials.get(f.count));
            feature.put("sq", f.squares < 0 ? null : partials.get(f.squares));
            features.add(feature);
        }
        view.put("features", features);
        return view;
    }

    private static String partialName(TileSpec s, TileSpec.Partial p) {
        switch (p.kind) {
            case EVENTS: return "n";
            case SUM: return "sum:" + s.columns.get(p.column);
            case COUNT: return "n:" + s.columns.get(p.column);
            default: return "sq:" + s.columns.get(p.column);
        }
    }

    private static Map<String, Object> redis(RedisSinkSpec s) {
        Base64.Encoder b64 = Base64.getEncoder();
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("host", s.host);
        out.put("port", s.port);
        out.put("db", s.db);
        List<Object> cluster = new ArrayList<>();
        s.cluster.forEach(seed -> cluster.add(List.of(seed.getHost(), seed.getPort())));
        out.put("cluster", cluster);
        out.put("user", s.user);
        out.put("password", s.password);
        out.put("timeout_ms", s.timeoutMs);
        out.put("retry_ms", s.retryMs);
        out.put("project", new String(s.project, StandardCharsets.UTF_8));
        out.put("script", s.script);
        out.put("batch_rows", s.batchRows);
        out.put("rows_per_call", s.rowsPerCall);
        out.put("flush_ms", s.flushMs);
        out.put("lag_edges_ms", s.lagEdgesMs);
        Map<RedisSinkSpec.ViewLayout, String> names = new java.util.IdentityHashMap<>();
        Map<String, Object> views = new LinkedHashMap<>();
        for (Map.Entry<String, RedisSinkSpec.ViewLayout> e : s.views.entrySet()) {
            RedisSinkSpec.ViewLayout layout = e.getValue();
            names.put(layout, e.getKey());
            Map<String, Object> view = new LinkedHashMap<>();
            view.put("prefix", b64.encodeToString(layout.prefix));
            view.put("key_count", layout.keyCount);
            view.put("string_tag", b64.encodeToString(layout.stringTag));
            view.put("version_field", b64.encodeToString(layout.versionField));
            view.put("ts_field", b64.encodeToString(layout.tsField));
            List<Object> fields = new ArrayList<>();
            for (int i = 0; i < layout.names.size(); i++) {
                fields.add(List.of(layout.names.get(i), b64.encodeToString(layout.fields.get(i))));
            }
            view.put("fields", fields);
            views.put(e.getKey(), view);
        }
        Map<String, Object> groups = new LinkedHashMap<>();
        for (Map.Entry<String, RedisSinkSpec.ViewLayout[]> g : s.groups.entrySet()) {
            List<String> members = new ArrayList<>();
            for (RedisSinkSpec.ViewLayout layout : g.getValue()) {
                members.add(names.get(layout));
            }
            groups.put(g.getKey(), members);
        }
        out.put("groups", groups);
        out.put("views", views);
        return out;
    }

    /** The contract spec as compiled: bounds, zones, ranges, each type's rules, and two flags it raises. */
    private static Map<String, Object> contract(ContractRules r) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("max_record_bytes", r.maxBytes);
        out.put("dlq_payload_bytes", r.dlqBytes);
        out.put("event_time_ms", List.of(r.minMs, r.maxMs));
        out.put("default_zone", r.defaultZone.getId());
        out.put("default_price_range", r.defaultRange);
        Map<String, Object> types = new java.util.TreeMap<>();
        for (Map.Entry<String, List<FieldRule>> type : r.types.entrySet()) {
            List<Object> rules = new ArrayList<>();
            for (FieldRule rule : type.getValue()) {
                Map<String, Object> one = new LinkedHashMap<>();
                one.put("name", rule.name);
                one.put("kind", rule.kind);
                one.put("required", rule.required);
                one.put("nullable", rule.nullable);
                one.put("min_length", rule.minLength);
                one.put("max_length", rule.maxLength);
                one.put("minimum", rule.minimum == null ? null : rule.minimum.doubleValue());
                one.put("maximum", rule.maximum == null ? null : rule.maximum.doubleValue());
                rules.add(one);
            }
            types.put(type.getKey(), rules);
        }
        out.put("types", types);
        out.put("complimentary", r.flags("booking", "", name -> "price_paid".equals(name) ? (Object) 0L : null));
        out.put("outlier", r.flags("search", "", name -> "price_shown".equals(name) ? (Object) 1e9 : null));
        return out;
    }
}
