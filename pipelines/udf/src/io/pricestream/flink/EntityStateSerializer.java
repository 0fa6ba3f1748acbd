package io.pricestream.flink;

import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;

import org.apache.flink.api.common.typeutils.SimpleTypeSerializerSnapshot;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.TypeSerializerSnapshot;
import org.apache.flink.api.common.typeutils.base.StringSerializer;
import org.apache.flink.core.memory.DataInputView;
import org.apache.flink.core.memory.DataOutputView;

/**
 * The tile operator's state ({@link TileAggregator.EntityState}) in a compact binary form, with a
 * deep copy by hand.
 *
 * <p>Without it Flink falls back to Kryo for the state's maps: a JFR profile of 600,000 events put
 * 10% of the job's samples in Kryo writing the checkpoints, and the heap backend's copy-on-write
 * (a state touched while a snapshot runs is copied first) went through Kryo as well.
 *
 * <p>Layout: the keys, anchor, version, publish time, eviction time, the dirty and changed flags,
 * then per view its tiles in start order: the start, the partials and, for a competitor-rate view,
 * each competitor's {rate, time, offset}. Format version 1; a change of layout needs a new version
 * and a migration in {@link Snapshot}.
 */
public final class EntityStateSerializer extends TypeSerializer<TileAggregator.EntityState> {

    private static final long serialVersionUID = 1L;
    static final EntityStateSerializer INSTANCE = new EntityStateSerializer();

    @Override
    public boolean isImmutableType() {
        return false;
    }

    @Override
    public TypeSerializer<TileAggregator.EntityState> duplicate() {
        return this;  // stateless
    }

    @Override
    public TileAggregator.EntityState createInstance() {
        return new TileAggregator.EntityState();
    }

    @Override
    public TileAggregator.EntityState copy(TileAggregator.EntityState from) {
        TileAggregator.EntityState out = new TileAggregator.EntityState();
        out.keys = from.keys == null ? null : from.keys.clone();  // strings are immutable
        out.anchor = from.anchor;
        out.version = from.version;
        out.publish = from.publish;
        out.evictAt = from.evictAt;
        out.dirty = from.dirty;
        out.changed = from.changed == null ? null : from.changed.clone();
        if (from.tiles != null) {
            out.tiles = new ArrayList<>(from.tiles.size());
            for (TreeMap<Long, TileAggregator.Tile> view : from.tiles) {
                TreeMap<Long, TileAggregator.Tile> copied = new TreeMap<>();
                for (Map.Entry<Long, TileAggregator.Tile> e : view.entrySet()) {
                    copied.put(e.getKey(), copyTile(e.getValue()));
                }
                out.tiles.add(copied);
            }
        }
        return out;
    }

    private static TileAggregator.Tile copyTile(TileAggregator.Tile from) {
        TileAggregator.Tile out = new TileAggregator.Tile();
        out.p = from.p.clone();
        if (from.rates != null) {
            out.rates = new HashMap<>(from.rates.size() * 2);
            for (Map.Entry<String, double[]> e : from.rates.entrySet()) {
                out.rates.put(e.getKey(), e.getValue().clone());
            }
        }
        return out;
    }

    @Override
    public TileAggregator.EntityState copy(TileAggregator.EntityState from, TileAggregator.EntityState reuse) {
        return copy(from);
    }

    @Override
    public int getLength() {
        return -1;
    }

    @Override
    public void serialize(TileAggregator.EntityState st, DataOutputView out) throws IOException {
        out.writeInt(st.keys.length);
        for (String key : st.keys) {
            StringSerializer.INSTANCE.serialize(key, out);
        }
        out.writeLong(st.anchor);
        out.writeLong(st.version);
        out.writeLong(st.publish);
        out.writeLong(st.evictAt);
        out.writeBoolean(st.dirty);
        out.writeInt(st.changed.length);
        for (boolean changed : st.changed) {
            out.writeBoolean(changed);
        }
        out.writeInt(st.tiles.size());
        for (TreeMap<Long, TileAggregator.Tile> view : st.tiles) {
            out.writeInt(view.size());
            for (Map.Entry<Long, TileAggregator.Tile> e : view.entrySet()) {
                out.writeLong(e.getKey());
                TileAggregator.Tile tile = e.getValue();
                out.writeInt(tile.p.length);
                for (double x : tile.p) {
                    out.writeDouble(x);
                }
                if (tile.rates == null) {
                    out.writeInt(-1);
                    continue;
                }
                out.writeInt(tile.rates.size());
                for (Map.Entry<String, double[]> r : tile.rates.entrySet()) {
                    StringSerializer.INSTANCE.serialize(r.getKey(), out);
                    double[] held = r.getValue();
                    out.writeDouble(held[0]);
                    out.writeDouble(held[1]);
                    out.writeDouble(held[2]);
                }
            }
        }
    }

    @Override
    public TileAggregator.EntityState deserialize(DataInputView in) throws IOException {
        TileAggregator.EntityState st = new TileAggregator.EntityState();
        st.keys = new String[in.readInt()];
        for (int k = 0; k < st.keys.length; k++) {
            st.keys[k] = StringSerializer.INSTANCE.deserialize(in);
        }
        st.anchor = in.readLong();
        st.version = in.readLong();
        st.publish = in.readLong();
        st.evictAt = in.readLong();
        st.dirty = in.readBoolean();
        st.changed = new boolean[in.readInt()];
        for (int v = 0; v < st.changed.length; v++) {
            st.changed[v] = in.readBoolean();
        }
        int views = in.readInt();
        st.tiles = new ArrayList<>(views);
        for (int v = 0; v < views; v++) {
            TreeMap<Long, TileAggregator.Tile> view = new TreeMap<>();
            int tiles = in.readInt();
            for (int t = 0; t < tiles; t++) {
                long start = in.readLong();
                TileAggregator.Tile tile = new TileAggregator.Tile();
                tile.p = new double[in.readInt()];
                for (int i = 0; i < tile.p.length; i++) {
                    tile.p[i] = in.readDouble();
                }
                int rates = in.readInt();
                if (rates >= 0) {
                    tile.rates = new HashMap<>(Math.max(4, rates * 2));
                    for (int r = 0; r < rates; r++) {
                        String competitor = StringSerializer.INSTANCE.deserialize(in);
                        tile.rates.put(competitor, new double[] {in.readDouble(), in.readDouble(), in.readDouble()});
                    }
                }
                view.put(start, tile);
            }
            st.tiles.add(view);
        }
        return st;
    }

    @Override
    public TileAggregator.EntityState deserialize(TileAggregator.EntityState reuse, DataInputView in)
        throws IOException {
        return deserialize(in);
    }

    @Override
    public void copy(DataInputView source, DataOutputView target) throws IOException {
        serialize(deserialize(source), target);
    }

    @Override
    public boolean equals(Object obj) {
        return obj instanceof EntityStateSerializer;
    }

    @Override
    public int hashCode() {
        return EntityStateSerializer.class.hashCode();
    }

    @Override
    public TypeSerializerSnapshot<TileAggregator.EntityState> snapshotConfiguration() {
        return new Snapshot();
    }

    /** The serializer's snapshot in a checkpoint: stateless, so restoring needs only the class. */
    public static final class Snapshot extends SimpleTypeSerializerSnapshot<TileAggregator.EntityState> {
        public Snapshot() {
            super(() -> INSTANCE);
        }
    }
}
