package io.pricestream.flink;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import redis.clients.jedis.ClusterPipeline;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisCluster;
import redis.clients.jedis.Pipeline;
import redis.clients.jedis.Response;
import redis.clients.jedis.exceptions.JedisDataException;
import redis.clients.jedis.util.JedisClusterCRC16;

/**
 * {@link RedisFeatureSink}'s connection to Redis and its script calls: one server through one
 * {@link Pipeline}, or a cluster through one {@link ClusterPipeline} with the calls grouped by hash
 * slot. Connects on first use; a Jedis error propagates (the writer retries, then fails the job) and
 * the caller closes the connection so the next attempt starts afresh.
 */
final class RedisScriptClient {
    /** The sink's logger: the messages keep the name they had when this was part of the writer. */
    private static final Logger LOG = LoggerFactory.getLogger(RedisFeatureSink.class);

    private final RedisSinkSpec spec;
    private Jedis jedis;
    private JedisCluster cluster;
    private String sha;

    /** The script replies of one batch, and the entities in the order of the replies' steps. */
    static final class Replies {
        final List<EntityRows> groups;
        final List<Object> values;

        Replies(List<EntityRows> groups, List<Object> values) {
            this.groups = groups;
            this.values = values;
        }
    }

    RedisScriptClient(RedisSinkSpec spec) {
        this.spec = spec;
    }

    private void connect() {
        if (jedis != null || cluster != null) {
            return;
        }
        DefaultJedisClientConfig.Builder config = DefaultJedisClientConfig.builder()
            .database(spec.db).connectionTimeoutMillis(spec.timeoutMs).socketTimeoutMillis(spec.timeoutMs)
            .clientName("pricestream-feature-job");
        if (spec.password != null) {
            config.password(spec.password);
            if (spec.user != null) {
                config.user(spec.user);
            }
        }
        if (!spec.cluster.isEmpty()) {
            cluster = new JedisCluster(new HashSet<>(spec.cluster), config.build());
            sha = sha1Hex(spec.script);  // loaded on each master on its first NOSCRIPT
            return;
        }
        jedis = new Jedis(new HostAndPort(spec.host, spec.port), config.build());
        sha = jedis.scriptLoad(spec.script);
    }

    private static String sha1Hex(String text) {
        try {
            byte[] digest = MessageDigest.getInstance("SHA-1").digest(text.getBytes(StandardCharsets.UTF_8));
            StringBuilder out = new StringBuilder();
            for (byte b : digest) {
                out.append(String.format("%02x", b));
            }
            return out.toString();
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("redis sink: the JVM has no SHA-1", e);
        }
    }

    /** Sets one field of a hash (the writer's status), connecting first. */
    void hset(byte[] key, byte[] field, byte[] value) {
        connect();
        if (cluster != null) {
            cluster.hset(key, field, value);
        } else {
            jedis.hset(key, field, value);
        }
    }

    /** Runs the script over {@code rows}: the replies, and the entities in the order the replies cover them. */
    Replies apply(List<EntityRows> rows) {
        connect();
        if (cluster != null) {
            List<List<EntityRows>> chunks = chunks(rows);
            List<Object> replies = applyCluster(chunks);
            List<EntityRows> ordered = new ArrayList<>(rows.size());
            for (List<EntityRows> chunk : chunks) {
                ordered.addAll(chunk);
            }
            return new Replies(ordered, replies);
        }
        List<Response<Object>> replies = new ArrayList<>();
        try (Pipeline pipe = jedis.pipelined()) {
            byte[] script = sha.getBytes(StandardCharsets.US_ASCII);
            for (List<EntityRows> chunk : chunks(rows)) {
                replies.add(pipe.evalsha(script, CasScript.keys(chunk), CasScript.scriptArgs(chunk)));
            }
            pipe.sync();
        } catch (JedisDataException e) {
            if (e.getMessage() != null && e.getMessage().startsWith("NOSCRIPT")) {
                sha = null;  // Redis restarted and lost its script cache: load it again on the retry
                close();
            }
            throw e;
        }
        List<Object> values = new ArrayList<>(replies.size());
        for (Response<Object> reply : replies) {
            values.add(reply.get());
        }
        return new Replies(rows, values);
    }

    /** The script calls: runs of entities of about {@code rows_per_call} rows; on a cluster, of one hash slot each. */
    private List<List<EntityRows>> chunks(List<EntityRows> groups) {
        List<List<EntityRows>> out = new ArrayList<>();
        if (cluster == null) {
            cut(groups, out);
            return out;
        }
        Map<Integer, List<EntityRows>> bySlot = new LinkedHashMap<>();
        for (EntityRows g : groups) {
            bySlot.computeIfAbsent(JedisClusterCRC16.getSlot(g.key), k -> new ArrayList<>()).add(g);
        }
        for (List<EntityRows> slot : bySlot.values()) {
            cut(slot, out);
        }
        return out;
    }

    private void cut(List<EntityRows> groups, List<List<EntityRows>> out) {
        int start = 0;
        int rows = 0;
        for (int i = 0; i < groups.size(); i++) {
            rows += groups.get(i).rows.size();
            if (rows >= spec.rowsPerCall || i == groups.size() - 1) {
                out.add(groups.subList(start, i + 1));
                start = i + 1;
                rows = 0;
            }
        }
    }

    /** One cluster pipeline of script calls; a {@code NOSCRIPT} master gets the script, then the batch is retried. */
    private List<Object> applyCluster(List<List<EntityRows>> chunks) {
        byte[] script = sha.getBytes(StandardCharsets.US_ASCII);
        List<Response<Object>> replies = new ArrayList<>();
        try (ClusterPipeline pipe = cluster.pipelined()) {
            for (List<EntityRows> chunk : chunks) {
                replies.add(pipe.evalsha(script, CasScript.keys(chunk), CasScript.scriptArgs(chunk)));
            }
            pipe.sync();
        }
        List<Object> out = new ArrayList<>(replies.size());
        JedisDataException missing = null;
        Set<Integer> loaded = new HashSet<>();
        for (int i = 0; i < replies.size(); i++) {
            try {
                out.add(replies.get(i).get());
            } catch (JedisDataException e) {
                if (e.getMessage() == null || !e.getMessage().startsWith("NOSCRIPT")) {
                    throw e;
                }
                byte[] key = chunks.get(i).get(0).key;
                if (loaded.add(JedisClusterCRC16.getSlot(key))) {
                    cluster.scriptLoad(spec.script.getBytes(StandardCharsets.UTF_8), key);
                }
                missing = e;
            }
        }
        if (missing != null) {
            throw missing;  // the writer retries the whole batch: applied rows compare equal and are skipped
        }
        return out;
    }

    /** Closes the connection, quietly: the next call connects again. */
    void close() {
        if (cluster != null) {
            try {
                cluster.close();
            } catch (RuntimeException e) {
                LOG.debug("redis sink: close failed", e);
            }
            cluster = null;
        }
        if (jedis != null) {
            try {
                jedis.close();
            } catch (RuntimeException e) {
                LOG.debug("redis sink: close failed", e);
            }
            jedis = null;
        }
    }
}
