package io.pricestream.flink;

import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.Map;

import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.runtime.state.VoidNamespaceSerializer;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.InternalTimer;
import org.apache.flink.streaming.api.operators.InternalTimerService;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.api.operators.Triggerable;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.types.Row;

/**
 * The tiles of one entity (a stay, or a hotel) for every windowed view keyed like it, merged into
 * window values on a processing-time flush.
 *
 * <p>Per event, each view's tile (the event time floored to the view's tile size) gets an O(1) update
 * of its mergeable partials ({@code n}, {@code sum:c}, {@code n:c}, {@code sq:c}; the latest rate per
 * competitor). The entity is then marked dirty, and at the next flush boundary (every
 * {@code flush_ms} of processing time, or {@code backlog_flush_ms} while the input is behind (see
 * {@link #catchingUp}), one operator timer for all entities, not a timer per entity;
 * and before every checkpoint barrier, so no checkpoint holds an entity with rows still to send) it
 * emits one row for its group's views (see {@link #emit}): each view's values as of the
 * entity's newest event (its anchor) over the tiles that start at or after
 * {@code floor(anchor, tile) - window}, the semantics of {@code events.catalog}. Tiles below that
 * floor can never be in a window again (the anchor only grows) and are dropped; an event whose tile
 * is already below the floor changes nothing for that view.
 *
 * <p>A row's {@code version} is the greatest source offset of the entity's events (they share a
 * partition, keyed by hotel), so it grows with every change, a replay reproduces it, and the online
 * writer's compare-and-set keeps the newest. An entity whose anchor is {@code horizon_ms} (the
 * longest window, a tile and the allowed lateness) behind the watermark leaves the state: no event
 * it can still accept would change a value. Its event-time timer is set once and moved on when it
 * fires early (the anchor grew), not set again for every hour the anchor moves. The end of a
 * bounded input (the final watermark) flushes every entity.
 *
 * <p>A keyed operator rather than a {@code KeyedProcessFunction}: a profile put a fifth of the tile
 * task in registering, polling and checkpointing one processing-time timer per dirty entity. Its
 * timer service keeps the function's name ({@code user-timers}), so the timers of a checkpoint taken
 * by the earlier build restore into it and fire as before.
 */
public class TileAggregator extends AbstractStreamOperator<Row>
    implements OneInputStreamOperator<Row, Row>, Triggerable<String, VoidNamespace> {

    private static final long serialVersionUID = 1L;
    private static final long EVICT_ROUND_MS = 3_600_000L;

    private final TileSpec spec;
    private final TileSpec.Group group;
    private transient ValueState<EntityState> state;
    private transient InternalTimerService<VoidNamespace> timers;
    /** Keys with rows to emit at the next flush; never in a checkpoint (a barrier flushes first). */
    private transient LinkedHashSet<String> dirty;
    private transient StreamRecord<Row> record;
    /** The greatest Kafka append time of the events read (how far behind the input is), and the last flush. */
    private transient long newestPublish;
    private transient long lastFlush;

    /**
     * One entity's tiles, newest event time, version and publish time, and what changed since the last flush.
     *
     * <p>A view's live tiles are a contiguous run of tile starts, {@code floor(anchor) - window} to
     * {@code floor(anchor)}, so they sit in a ring of {@link #slots} slots: the tile that starts at
     * {@code s} is in slot {@code (s / tile) mod slots}. A slot holding an older start holds a tile
     * that left the window (it is a whole ring behind): it is replaced or skipped, never merged.
     */
    public static final class EntityState {
        public String[] keys;
        public long anchor = Long.MIN_VALUE;
        public long version = -1L;
        public long publish = -1L;
        public long evictAt = Long.MIN_VALUE;
        public boolean dirty;
        public boolean[] changed;
        /** Per view, the start of the tile in each slot (meaningless where the tile is null). */
        public long[][] starts;
        /** Per view, the tile in each slot, or null. */
        public Tile[][] tiles;
        /** Per view, a bit per slot: set where {@link #tiles} holds a tile (a flush visits only those). */
        public long[][] occupied;

        public EntityState() {}

        EntityState(String[] keys, int[] slots) {
            this.keys = keys;
            this.changed = new boolean[slots.length];
            this.starts = new long[slots.length][];
            this.tiles = new Tile[slots.length][];
            this.occupied = new long[slots.length][];
            for (int v = 0; v < slots.length; v++) {
                starts[v] = new long[slots[v]];
                tiles[v] = new Tile[slots[v]];
                occupied[v] = new long[words(slots[v])];
            }
        }
    }

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

    /** A tile's partials (in the view's order) and, for competitor-rate views, per competitor {rate, time, offset}. */
    public static final class Tile {
        public double[] p;
        public HashMap<String, double[]> rates;

        public Tile() {}

        Tile(int partials, boolean withRates) {
            this.p = new double[partials];
            this.rates = withRates ? new HashMap<>() : null;
        }
    }

    public TileAggregator(TileSpec spec, TileSpec.Group group) {
        this.spec = spec;
        this.group = group;
    }

    @Override
    public void open() throws Exception {
        super.open();
        // a serializer of its own: Kryo wrote the checkpoints and the copy-on-write copies before (10% of the job)
        state = getPartitionedState(new ValueStateDescriptor<>("tiles", EntityStateSerializer.INSTANCE));
        timers = getInternalTimerService("user-timers", VoidNamespaceSerializer.INSTANCE, this);
        dirty = new LinkedHashSet<>();
        record = new StreamRecord<>(null);
        newestPublish = Long.MIN_VALUE;
        lastFlush = getProcessingTimeService().getCurrentProcessingTime();
        scheduleFlush();
    }

    private void scheduleFlush() {
        long now = getProcessingTimeService().getCurrentProcessingTime();
        getProcessingTimeService().registerTimer(now - Math.floorMod(now, spec.flushMs) + spec.flushMs, ts -> {
            if (!catchingUp(ts)) {
                flush();
                lastFlush = ts;
            }
            scheduleFlush();
        });
    }

    /**
     * Whether this flush waits: the newest event read was appended more than {@code backlog_lag_ms}
     * ago (a backlog, a backfill, a restart's replay) and the last flush is less than
     * {@code backlog_flush_ms} old. Catching up, an entity's events of a longer interval fold into
     * one row, which is what the job's cost follows; a job that keeps up flushes every {@code flush_ms}.
     */
    private boolean catchingUp(long now) {
        return spec.backlogFlushMs > spec.flushMs && newestPublish != Long.MIN_VALUE
            && now - newestPublish > spec.backlogLagMs && now - lastFlush < spec.backlogFlushMs;
    }

    /** Emits the changed views of every dirty entity. */
    private void flush() throws Exception {
        if (dirty.isEmpty()) {
            return;
        }
        for (String key : dirty) {
            setCurrentKey(key);
            EntityState st = state.value();
            if (st != null && st.dirty) {
                emit(st);
                state.update(st);
            }
        }
        dirty.clear();
    }

    @Override
    public void prepareSnapshotPreBarrier(long checkpointId) throws Exception {
        flush();  // the rows before the barrier: a restore never finds an entity whose rows were not sent
        super.prepareSnapshotPreBarrier(checkpointId);
    }

    @Override
    public void finish() throws Exception {
        flush();
        super.finish();
    }

    @Override
    public void processElement(StreamRecord<Row> element) throws Exception {
        Row row = element.getValue();
        EntityState st = state.value();
        if (st == null) {
            String[] keys = new String[group.keyIdx.length];
            for (int k = 0; k < keys.length; k++) {
                keys[k] = (String) row.getField(group.keyIdx[k]);
            }
            int[] slots = new int[group.views.size()];
            for (int v = 0; v < slots.length; v++) {
                slots[v] = slots(group.views.get(v));
            }
            st = new EntityState(keys, slots);
        }
        long time = ((Number) row.getField(spec.timeIdx)).longValue();
        long offset = ((Number) row.getField(spec.offsetIdx)).longValue();
        Object published = row.getField(spec.publishIdx);
        long anchor = Math.max(st.anchor, time);
        for (int v = 0; v < group.views.size(); v++) {
            TileSpec.View view = group.views.get(v);
            long start = time - Math.floorMod(time, view.tileMs);
            if (start < floorOf(view, anchor)) {
                continue;  // the tile left this view's window for good
            }
            long[] starts = st.starts[v];
            Tile[] ring = st.tiles[v];
            int slot = (int) Math.floorMod(Math.floorDiv(start, view.tileMs), (long) ring.length);
            Tile tile = ring[slot];
            if (tile == null || starts[slot] != start) {
                if (tile != null && starts[slot] > start) {
                    continue;  // cannot happen (start is in the window): the slot's newer tile wins
                }
                tile = new Tile(view.partials.size(), view.rates);  // the slot's older tile left the window
                ring[slot] = tile;
                starts[slot] = start;
                st.occupied[v][slot >>> 6] |= 1L << (slot & 63);
            }
            accumulate(view, tile, row, time, offset);
            st.changed[v] = true;
        }
        st.anchor = anchor;
        st.version = Math.max(st.version, offset);
        if (published != null) {
            long publish = ((Number) published).longValue();
            st.publish = Math.max(st.publish, publish);
            newestPublish = Math.max(newestPublish, publish);
        }
        st.dirty = true;
        dirty.add((String) getCurrentKey());
        long evictAt = anchor + spec.horizonMs;
        evictAt = evictAt - Math.floorMod(evictAt, EVICT_ROUND_MS) + EVICT_ROUND_MS;
        if (evictAt > st.evictAt) {
            if (st.evictAt == Long.MIN_VALUE) {
                timers.registerEventTimeTimer(VoidNamespace.INSTANCE, evictAt);  // moved on when it fires early
            }
            st.evictAt = evictAt;
        }
        state.update(st);
    }

    @Override
    public void onEventTime(InternalTimer<String, VoidNamespace> timer) throws Exception {
        EntityState st = state.value();
        if (st == null) {
            return;
        }
        if (timer.getTimestamp() < st.evictAt) {
            timers.registerEventTimeTimer(VoidNamespace.INSTANCE, st.evictAt);  // the anchor grew since
            return;
        }
        if (st.dirty) {
            emit(st);
        }
        state.clear();
    }

    /** Only timers of a checkpoint taken by the earlier build (a flush timer per dirty entity). */
    @Override
    public void onProcessingTime(InternalTimer<String, VoidNamespace> timer) throws Exception {
        EntityState st = state.value();
        if (st != null && st.dirty) {
            emit(st);
            state.update(st);
        }
    }

    private static long floorOf(TileSpec.View view, long anchor) {
        return anchor - Math.floorMod(anchor, view.tileMs) - view.windowMs;
    }

    private void accumulate(TileSpec.View view, Tile tile, Row row, long time, long offset) {
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
     * Emits the entity's rows. A group of one view emits its row when it changed; a group of several
     * emits one row for all of them (named after the group, the views' features one after another,
     * every view as of the anchor, changed or not: an unchanged view's values are the same again), which
     * the sinks split per view: one record crosses to each sink task per entity instead of one per view.
     */
    private void emit(EntityState st) {
        boolean whole = group.views.size() > 1;
        double[] all = whole ? new double[group.featureCount] : null;
        int at = 0;
        for (int v = 0; v < group.views.size(); v++) {
            if (!whole && !st.changed[v]) {
                continue;
            }
            TileSpec.View view = group.views.get(v);
            long floor = floorOf(view, st.anchor);
            long[] starts = st.starts[v];
            Tile[] ring = st.tiles[v];
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
                    Tile tile = ring[slot];
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
            double[] rates = null;
            if (latest != null) {
                rates = new double[latest.size()];
                int r = 0;
                for (double rate : latest.values()) {
                    rates[r++] = rate;
                }
                Arrays.sort(rates);
            }
            st.changed[v] = false;
            if (whole) {
                for (int i = 0; i < view.features.size(); i++) {
                    all[at++] = value(view.features.get(i), totals, rates);
                }
                continue;
            }
            double[] values = new double[view.features.size()];  // the view's features in catalogue order
            for (int i = 0; i < values.length; i++) {
                values[i] = value(view.features.get(i), totals, rates);
            }
            collect(st, view.name, values);
        }
        if (whole) {
            collect(st, group.name, all);
        }
        st.dirty = false;
    }

    private void collect(EntityState st, String view, double[] values) {
        // the columns of TileJob.OUTPUT_NAMES, by position
        Row row = Row.of(st.keys[0], st.keys.length > 1 ? st.keys[1] : null, st.keys.length > 2 ? st.keys[2] : null,
            view, st.anchor, st.version, st.publish, values);
        output.collect(record.replace(row));
    }

    /** A feature's value over the window's totals; NaN when it has none (no rate, no event). */
    private static double value(TileSpec.Feature f, double[] totals, double[] rates) {
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
