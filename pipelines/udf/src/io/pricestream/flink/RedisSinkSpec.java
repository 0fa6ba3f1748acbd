package io.pricestream.flink;

import java.io.IOException;
import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

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
        SpecNode root = SpecNode.parse("redis sink spec", json);
        RedisSinkSpec s = new RedisSinkSpec();
        s.host = root.text("host");
        s.port = root.int32("port");
        for (SpecNode seed : root.items("cluster")) {  // empty for one server
            s.cluster.add(new HostAndPort(seed.text(0), seed.int32(1)));
        }
        s.db = root.int32("db");
        s.user = root.nullableText("user");
        s.password = root.nullableText("password");
        s.timeoutMs = root.int32("timeout_ms");
        s.retryMs = root.integer("retry_ms");
        s.project = root.text("project").getBytes(StandardCharsets.UTF_8);
        s.script = root.text("script");
        s.batchRows = root.int32("batch_rows");
        s.rowsPerCall = root.int32("rows_per_call");
        s.flushMs = root.integer("flush_ms");
        s.lagEdgesMs = root.integers("lag_edges_ms");
        for (Map.Entry<String, SpecNode> e : root.members("views").entrySet()) {
            s.views.put(e.getKey(), s.layout(e.getValue()));
        }
        if (s.views.isEmpty()) {
            throw new IllegalArgumentException("redis sink spec: got no views, expected the layout of each view");
        }
        for (Map.Entry<String, String[]> g : root.textArrayMembers("groups").entrySet()) {
            ViewLayout[] members = new ViewLayout[g.getValue().length];
            for (int i = 0; i < members.length; i++) {
                String view = g.getValue()[i];
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

    /** One view's layout, its byte strings decoded from base64. */
    private ViewLayout layout(SpecNode v) {
        Base64.Decoder b64 = Base64.getDecoder();
        ViewLayout layout = new ViewLayout();
        layout.prefix = b64.decode(v.text("prefix"));
        for (ViewLayout other : views.values()) {
            if (java.util.Arrays.equals(other.prefix, layout.prefix)) {
                layout.prefix = other.prefix;  // one array per entity kind: rows are grouped by identity
                break;
            }
        }
        layout.keyCount = v.int32("key_count");
        layout.stringTag = b64.decode(v.text("string_tag"));
        layout.versionField = b64.decode(v.text("version_field"));
        layout.tsField = b64.decode(v.text("ts_field"));
        for (SpecNode f : v.items("fields")) {
            layout.names.add(f.text(0));
            layout.fields.add(b64.decode(f.text(1)));
        }
        return layout;
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
