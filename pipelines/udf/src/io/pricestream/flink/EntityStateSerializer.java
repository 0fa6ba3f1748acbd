package io.pricestream.flink;

import java.io.IOException;
import java.util.HashMap;
import java.util.Map;

import org.apache.flink.api.common.typeutils.SimpleTypeSerializerSnapshot;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.TypeSerializerSnapshot;
import org.apache.flink.api.common.typeutils.base.StringSerializer;
import org.apache.flink.core.memory.DataInputView;
import org.apache.flink.core.memory.DataOutputSerializer;
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
 * then per view its ring's size and its occupied slots: the slot, the tile's start, the partials and,
 * for a competitor-rate view, each competitor's {rate, time, offset}. A change of layout needs a
 * migration in {@link Snapshot}.
 */
public final class EntityStateSerializer extends TypeSerializer<TileAggregator.EntityState> {

    private static final long serialVersionUID = 1L;
    static final EntityStateSerializer INSTANCE = new EntityStateSerializer();

    /**
     * An entity is written here first, then to the checkpoint stream in one call: field by field
     * into the stream cost a call per long (a profile put 7% of the job in {@code DataOutputStream}).
     * One per thread: two tasks' snapshots may run at once.
     */
    private static final ThreadLocal<DataOutputSerializer> BUFFER =
        ThreadLocal.withInitial(() -> new DataOutputSerializer(4096));

    @Override
    public boolean isImmutableType() {
        return false;
    }

    @Override
    public TypeSerializer<TileAggregator.EntityState> duplicate() {
        return this;  // stateless (the write buffer is per thread)
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
            out.starts = new long[from.starts.length][];
            out.tiles = new TileAggregator.Tile[from.tiles.length][];
            out.occupied = new long[from.tiles.length][];
            for (int v = 0; v < from.tiles.length; v++) {
                out.starts[v] = from.starts[v].clone();
                out.occupied[v] = from.occupied[v].clone();
                TileAggregator.Tile[] ring = new TileAggregator.Tile[from.tiles[v].length];
                for (int slot = 0; slot < ring.length; slot++) {
                    TileAggregator.Tile tile = from.tiles[v][slot];
                    ring[slot] = tile == null ? null : copyTile(tile);
                }
                out.tiles[v] = ring;
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
    public void serialize(TileAggregator.EntityState st, DataOutputView target) throws IOException {
        DataOutputSerializer buffer = BUFFER.get();
        buffer.clear();
        write(st, buffer);
        target.write(buffer.getSharedBuffer(), 0, buffer.length());
    }

    private static void write(TileAggregator.EntityState st, DataOutputView out) throws IOException {
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
        out.writeInt(st.tiles.length);
        for (int v = 0; v < st.tiles.length; v++) {
            TileAggregator.Tile[] ring = st.tiles[v];
            int occupied = 0;
            for (TileAggregator.Tile tile : ring) {
                occupied += tile == null ? 0 : 1;
            }
            out.writeInt(ring.length);
            out.writeInt(occupied);
            for (int slot = 0; slot < ring.length; slot++) {
                TileAggregator.Tile tile = ring[slot];
                if (tile == null) {
                    continue;
                }
                out.writeInt(slot);
                out.writeLong(st.starts[v][slot]);
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
        st.starts = new long[views][];
        st.tiles = new TileAggregator.Tile[views][];
        st.occupied = new long[views][];
        for (int v = 0; v < views; v++) {
            int slots = in.readInt();
            st.starts[v] = new long[slots];
            st.tiles[v] = new TileAggregator.Tile[slots];
            st.occupied[v] = new long[TileWindows.words(slots)];
            int occupied = in.readInt();
            for (int t = 0; t < occupied; t++) {
                int slot = in.readInt();
                st.starts[v][slot] = in.readLong();
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
                st.tiles[v][slot] = tile;
                st.occupied[v][slot >>> 6] |= 1L << (slot & 63);
            }
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
