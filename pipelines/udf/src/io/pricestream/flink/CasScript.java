package io.pricestream.flink;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * The KEYS and ARGV of one call of {@code features/cas.lua} (the compare-and-set script of
 * {@link RedisFeatureSink}) for a run of entities: per step its count of pairs, its version field
 * and version, then the pairs.
 */
final class CasScript {

    private static final byte[][] SMALL = new byte[64][];

    static {
        for (int i = 0; i < SMALL.length; i++) {
            SMALL[i] = Integer.toString(i).getBytes(StandardCharsets.US_ASCII);
        }
    }

    private CasScript() {}

    private static byte[] ascii(int n) {
        return n < SMALL.length ? SMALL[n] : Integer.toString(n).getBytes(StandardCharsets.US_ASCII);
    }

    /**
     * ARGV of {@code features/cas.lua}: per step its count of pairs, its version field and version, the
     * pairs. A merged group's step is guarded by its first row's version field; the other rows'
     * version fields are pairs of it.
     */
    static List<byte[]> scriptArgs(List<EntityRows> chunk) {
        int size = 0;
        for (EntityRows g : chunk) {
            for (PendingRow p : g.rows) {
                size += 5 + 2 * p.values.length;
            }
        }
        List<byte[]> args = new ArrayList<>(size);
        for (EntityRows g : chunk) {
            if (!g.merged()) {
                for (PendingRow p : g.rows) {
                    args.add(ascii(p.values.length + 1));
                    args.add(p.layout.versionField);
                    args.add(Long.toString(p.version).getBytes(StandardCharsets.US_ASCII));
                    pairs(args, p);
                }
                continue;
            }
            int pairs = g.rows.size() - 1;
            for (PendingRow p : g.rows) {
                pairs += p.values.length + 1;
            }
            byte[] version = Long.toString(g.rows.get(0).version).getBytes(StandardCharsets.US_ASCII);
            args.add(ascii(pairs));
            args.add(g.rows.get(0).layout.versionField);
            args.add(version);
            for (int r = 0; r < g.rows.size(); r++) {
                PendingRow p = g.rows.get(r);
                if (r > 0) {
                    args.add(p.layout.versionField);
                    args.add(version);
                }
                pairs(args, p);
            }
        }
        return args;
    }

    /** A row's {@code _ts} pair and feature pairs. */
    private static void pairs(List<byte[]> args, PendingRow p) {
        args.add(p.layout.tsField);
        args.add(FeastBytes.encodeTimestamp(p.featureTime));
        for (int i = 0; i < p.values.length; i++) {
            args.add(p.layout.fields.get(i));
            args.add(p.values[i]);
        }
    }

    /** The script's KEYS: the entity hash of each step (one array per entity, shared by its steps). */
    static List<byte[]> keys(List<EntityRows> chunk) {
        List<byte[]> keys = new ArrayList<>(chunk.size() * 4);
        for (EntityRows g : chunk) {
            for (int r = g.steps(); r > 0; r--) {
                keys.add(g.key);
            }
        }
        return keys;
    }
}
