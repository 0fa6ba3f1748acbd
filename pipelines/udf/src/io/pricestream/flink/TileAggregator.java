package io.pricestream.flink;

import java.util.HashMap;
import java.util.LinkedHashSet;

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
     * {@code floor(anchor)}, so they sit in a ring of {@link TileWindows#slots} slots: the tile that starts at
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
                occupied[v] = new long[TileWindows.words(slots[v])];
            }
        }
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
                slots[v] = TileWindows.slots(group.views.get(v));
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
            if (start < TileWindows.floorOf(view, anchor)) {
                continue;  // the tile left this view's window for good
            }
            Tile tile = TileWindows.tileAt(st, v, view, start);
            if (tile == null) {
                continue;
            }
            TileWindows.accumulate(spec, view, tile, row, time, offset);
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
            double[] values = TileWindows.values(st, v, view);  // the view's features in catalogue order
            st.changed[v] = false;
            if (whole) {
                System.arraycopy(values, 0, all, at, values.length);
                at += values.length;
                continue;
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
}
