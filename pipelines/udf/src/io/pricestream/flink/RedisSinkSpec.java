package io.pricestream.flink;

import java.io.IOException;
import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.json.JsonMapper;

import redis.clients.jedis.HostAndPort;

/**
 * The settings of {@link RedisFeatureSink} and the byte layout of each view, read from the JSON of
 * {@code pipelines.job_specs.redis_sink_spec}: where Redis is (one server, or a cluster's seeds), how
 * rows are batched and retried, the compare-and-set script, and per view the entity-key prefix and
 * the murmur field names that Feast's reader expects.
 */
final class RedisSinkSpec implements Serializable {
    private static final long serialVersionUID = 1L;
    String host;
    int port;
    /** Seed nodes of a Redis Cluster; empty for one server. */
    final List<HostAndPort> cluster = new ArrayList<>();
    int db;
    String user;
    String password;
    int timeoutMs;
    long retryMs;
    byte[] project;
    String script;
    int batchRows;
    int rowsPerCall;
    long flushMs;
    long[] lagEdgesMs;
    final Map<String, ViewLayout> views = new HashMap<>();
    /** A group row's views, in the order of its features. */
    final Map<String, ViewLayout[]> groups = new HashMap<>();

    static RedisSinkSpec parse(String json) throws IOException {
        JsonNode root = JsonMapper.builder().build().readTree(json);
        RedisSinkSpec s = new RedisSinkSpec();
        s.host = root.get("host").asText();
        s.port = root.get("port").asInt();
        if (root.hasNonNull("cluster")) {
            for (JsonNode seed : root.get("cluster")) {
                s.cluster.add(new HostAndPort(seed.get(0).asText(), seed.get(1).asInt()));
            }
        }
        s.db = root.get("db").asInt();
        s.user = root.hasNonNull("user") ? root.get("user").asText() : null;
        s.password = root.hasNonNull("password") ? root.get("password").asText() : null;
        s.timeoutMs = root.get("timeout_ms").asInt();
        s.retryMs = root.get("retry_ms").asLong();
        s.project = root.get("project").asText().getBytes(StandardCharsets.UTF_8);
        s.script = root.get("script").asText();
        s.batchRows = root.get("batch_rows").asInt();
        s.rowsPerCall = root.get("rows_per_call").asInt();
        s.flushMs = root.get("flush_ms").asLong();
        JsonNode edges = root.get("lag_edges_ms");
        s.lagEdgesMs = new long[edges.size()];
        for (int i = 0; i < s.lagEdgesMs.length; i++) {
            s.lagEdgesMs[i] = edges.get(i).asLong();
        }
        Base64.Decoder b64 = Base64.getDecoder();
        Iterator<Map.Entry<String, JsonNode>> it = root.get("views").fields();
        while (it.hasNext()) {
            Map.Entry<String, JsonNode> e = it.next();
            JsonNode v = e.getValue();
            ViewLayout layout = new ViewLayout();
            layout.prefix = b64.decode(v.get("prefix").asText());
            for (ViewLayout other : s.views.values()) {
                if (java.util.Arrays.equals(other.prefix, layout.prefix)) {
                    layout.prefix = other.prefix;  // one array per entity kind: rows are grouped by identity
                    break;
                }
            }
            layout.keyCount = v.get("key_count").asInt();
            layout.stringTag = b64.decode(v.get("string_tag").asText());
            layout.versionField = b64.decode(v.get("version_field").asText());
            layout.tsField = b64.decode(v.get("ts_field").asText());
            for (JsonNode f : v.get("fields")) {
                layout.names.add(f.get(0).asText());
                layout.fields.add(b64.decode(f.get(1).asText()));
            }
            s.views.put(e.getKey(), layout);
        }
        if (s.views.isEmpty()) {
            throw new IllegalArgumentException("redis sink spec: got no views, expected the layout of each view");
        }
        Iterator<Map.Entry<String, JsonNode>> gs = root.get("groups").fields();
        while (gs.hasNext()) {
            Map.Entry<String, JsonNode> g = gs.next();
            ViewLayout[] members = new ViewLayout[g.getValue().size()];
            for (int i = 0; i < members.length; i++) {
                String view = g.getValue().get(i).asText();
                members[i] = s.views.get(view);
                if (members[i] == null) {
                    throw new IllegalArgumentException("redis sink spec: group '" + g.getKey() + "' names view '"
                        + view + "', expected one of " + s.views.keySet());
                }
            }
            s.groups.put(g.getKey(), members);
        }
        return s;
    }

    /** One view's Redis layout: entity-key prefix, field names, features in order. */
    static final class ViewLayout implements Serializable {
        private static final long serialVersionUID = 1L;
        byte[] prefix;
        int keyCount;
        byte[] stringTag;
        byte[] versionField;
        byte[] tsField;
        final List<String> names = new ArrayList<>();
        final List<byte[]> fields = new ArrayList<>();
    }
}
