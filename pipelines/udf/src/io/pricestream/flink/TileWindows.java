package io.pricestream.flink;

import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;

import org.apache.flink.types.Row;

/**
 * The window arithmetic of {@link TileAggregator}, kept apart from its Flink plumbing: the ring of
 * tile slots a view keeps per entity, the O(1) update of a tile's partials by one event, and a view's
 * feature values over the tiles of its window ({@code events.catalog}'s semantics).
 *
 * <p>A view's live tiles are a contiguous run of tile starts, {@code floor(anchor) - window} to
 * {@code floor(anchor)}, so they sit in a ring: the tile that starts at {@code s} is in slot
 * {@code (s / tile) mod slots}, and a bitmap marks the occupied slots so a flush visits only those.
 */
final class TileWindows {

    private TileWindows() {}

    /** Words of a ring's occupancy bitmap. */
    static int words(int slots) {
        return (slots + 63) >>> 6;
    }

    /** The first set bit of {@code bits} at or after {@code from} and before {@code limit}, or -1. */
    static int nextOccupied(long[] bits, int from, int limit) {
        if (from >= limit) {
            return -1;
        }
        int w = from >>> 6;
        long word = bits[w] & (-1L << (from & 63));
        while (word == 0) {
            if (++w << 6 >= limit) {
                return -1;
            }
            word = bits[w];
        }
        int i = (w << 6) + Long.numberOfTrailingZeros(word);
        return i < limit ? i : -1;
    }

    /** Slots of a view's ring: every tile start that can be in its window, {@code ceil(window / tile) + 1}. */
    static int slots(TileSpec.View view) {
        return (int) ((view.windowMs + view.tileMs - 1) / view.tileMs) + 1;
    }

    /** The least tile start in a view's window as of {@code anchor}: a tile that starts below it left the window. */
    static long floorOf(TileSpec.View view, long anchor) {
        return anchor - Math.floorMod(anchor, view.tileMs) - view.windowMs;
    }

    /**
     * The tile of view {@code v} that starts at {@code start}, made in its slot when the slot is empty or
     * holds an older tile (one that left the window); null when the slot holds a newer tile.
     */
    static TileAggregator.Tile tileAt(TileAggregator.EntityState st, int v, TileSpec.View view, long start) {
        long[] starts = st.starts[v];
        TileAggregator.Tile[] ring = st.tiles[v];
        int slot = (int) Math.floorMod(Math.floorDiv(start, view.tileMs), (long) ring.length);
        TileAggregator.Tile tile = ring[slot];
        if (tile == null || starts[slot] != start) {
            if (tile != null && starts[slot] > start) {
                return null;  // cannot happen (start is in the window): the slot's newer tile wins
            }
            tile = new TileAggregator.Tile(view.partials.size(), view.rates);  // the slot's older tile left the window
            ring[slot] = tile;
            starts[slot] = start;
            st.occupied[v][slot >>> 6] |= 1L << (slot & 63);
        }
        return tile;
    }

    /** Adds one event (its row, time and offset) to a tile's partials and, for a rate view, its competitor's rate. */
    static void accumulate(TileSpec spec, TileSpec.View view, TileAggregator.Tile tile, Row row, long time,
                           long offset) {
        double[] p = tile.p;
        for (int i = 0; i < p.length; i++) {
            TileSpec.Partial partial = view.partials.get(i);
            if (partial.column < 0) {
                p[i] += 1.0;  // n: every event of the tile
                continue;
            }
            Object value = row.getField(partial.column);
            if (value == null) {
                continue;
            }
            double x = ((Number) value).doubleValue();
            switch (partial.kind) {
                case SUM: p[i] += x; break;
                case COUNT: p[i] += 1.0; break;
                default: p[i] += x * x; break;
            }
        }
        if (tile.rates != null) {
            Object competitor = row.getField(spec.competitorIdx);
            Object rate = row.getField(spec.rateIdx);
            if (competitor != null && rate != null) {
                double[] held = tile.rates.get((String) competitor);
                // the newest rate of a competitor in the tile: greatest event time, then greatest offset
                if (held == null || held[1] < time || (held[1] == time && held[2] < offset)) {
                    tile.rates.put((String) competitor, new double[] {((Number) rate).doubleValue(), time, offset});
                }
            }
        }
    }

    /**
     * View {@code v}'s features (in catalogue order) as of the entity's anchor, over the tiles of its
     * window; the tiles that left the window are dropped from the ring on the way.
     */
    static double[] values(TileAggregator.EntityState st, int v, TileSpec.View view) {
        long floor = floorOf(view, st.anchor);
        long[] starts = st.starts[v];
        TileAggregator.Tile[] ring = st.tiles[v];
        long[] occupied = st.occupied[v];
        double[] totals = new double[view.partials.size()];
        Map<String, Double> latest = view.rates ? new HashMap<>() : null;
        // The occupied slots in ascending tile start: from the slot of the window's first tile
        // start, round the ring (consecutive starts are consecutive slots), so a newer tile's rate
        // wins and the sums add in time order. A slot below the floor holds a tile that left the window.
        long first = floor + Math.floorMod(-floor, view.tileMs);
        int origin = (int) Math.floorMod(Math.floorDiv(first, view.tileMs), (long) ring.length);
        for (int pass = 0; pass < 2; pass++) {
            int from = pass == 0 ? origin : 0;
            int limit = pass == 0 ? ring.length : origin;
            for (int slot = nextOccupied(occupied, from, limit); slot >= 0;
                 slot = nextOccupied(occupied, slot + 1, limit)) {
                TileAggregator.Tile tile = ring[slot];
                if (starts[slot] < floor) {
                    ring[slot] = null;
                    occupied[slot >>> 6] &= ~(1L << (slot & 63));
                    continue;
                }
                for (int i = 0; i < totals.length; i++) {
                    totals[i] += tile.p[i];
                }
                if (latest != null) {
                    for (Map.Entry<String, double[]> e : tile.rates.entrySet()) {
                        latest.put(e.getKey(), e.getValue()[0]);
                    }
                }
            }
        }
        double[] rates = latest == null ? null : sortedRates(latest);
        double[] values = new double[view.features.size()];
        for (int i = 0; i < values.length; i++) {
            values[i] = value(view.features.get(i), totals, rates);
        }
        return values;
    }

    private static double[] sortedRates(Map<String, Double> latest) {
        double[] rates = new double[latest.size()];
        int r = 0;
        for (double rate : latest.values()) {
            rates[r++] = rate;
        }
        Arrays.sort(rates);
        return rates;
    }

    /** A feature's value over the window's totals; NaN when it has none (no rate, no event). */
    static double value(TileSpec.Feature f, double[] totals, double[] rates) {
        switch (f.op) {
            case "sum":
                return totals[f.sum];
            case "comp_median": {
                int m = rates.length;
                if (m == 0) {
                    return Double.NaN;
                }
                return m % 2 == 1 ? rates[m / 2] : (rates[m / 2 - 1] + rates[m / 2]) / 2.0;
            }
            case "comp_min":
                return rates.length == 0 ? Double.NaN : rates[0];
            default: {  // mean, std (population)
                double n = totals[f.count];
                if (n < 0.5) {
                    return Double.NaN;
                }
                double mean = totals[f.sum] / n;
                if ("mean".equals(f.op)) {
                    return mean;
                }
                return Math.sqrt(Math.max(totals[f.squares] / n - mean * mean, 0.0));
            }
        }
    }
}
