package io.pricestream.flink;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

/**
 * The bytes of Feast's Redis layout that {@link RedisFeatureSink} writes: the entity key (the view's
 * prefix, each id tagged and length-prefixed, the project suffix), a feature's {@code feast.types.Value}
 * and a {@code google.protobuf.Timestamp}. The prefixes and tags come from the sink spec
 * ({@code features/layout.py}); this class only concatenates and encodes.
 */
final class FeastBytes {

    private FeastBytes() {}

    /** The entity hash's key: one id (a hotel) or three (hotel, room type, stay date), then the project. */
    static byte[] entityKey(RedisSinkSpec.ViewLayout layout, byte[] project, String hotel, String room,
                            String stay) {
        byte[][] parts = layout.keyCount == 1
            ? new byte[][] {hotel.getBytes(StandardCharsets.UTF_8)}
            : new byte[][] {hotel.getBytes(StandardCharsets.UTF_8), room.getBytes(StandardCharsets.UTF_8),
                            stay.getBytes(StandardCharsets.UTF_8)};
        int size = layout.prefix.length + project.length;
        for (byte[] p : parts) {
            size += layout.stringTag.length + 4 + p.length;
        }
        ByteBuffer out = ByteBuffer.allocate(size).order(ByteOrder.LITTLE_ENDIAN);
        out.put(layout.prefix);
        for (byte[] p : parts) {
            out.put(layout.stringTag).putInt(p.length).put(p);
        }
        out.put(project);
        return out.array();
    }

    /** A {@code feast.types.Value} with {@code double_val} (field 5, 64-bit). */
    static byte[] encodeDouble(double x) {
        long bits = Double.doubleToRawLongBits(x);
        byte[] out = new byte[9];
        out[0] = 0x29;
        for (int i = 1; i < 9; i++) {
            out[i] = (byte) bits;  // little-endian
            bits >>>= 8;
        }
        return out;
    }

    /** A {@code google.protobuf.Timestamp}: seconds (field 1) and nanos (field 2) as varints, zeros omitted. */
    static byte[] encodeTimestamp(long ms) {
        long seconds = Math.floorDiv(ms, 1000L);
        long nanos = Math.floorMod(ms, 1000L) * 1_000_000L;
        ByteBuffer out = ByteBuffer.allocate(22);
        if (seconds != 0) {
            out.put((byte) 0x08);
            varint(out, seconds);
        }
        if (nanos != 0) {
            out.put((byte) 0x10);
            varint(out, nanos);
        }
        byte[] bytes = new byte[out.position()];
        out.flip();
        out.get(bytes);
        return bytes;
    }

    private static void varint(ByteBuffer out, long value) {
        long v = value;
        while ((v & ~0x7FL) != 0) {
            out.put((byte) ((v & 0x7F) | 0x80));
            v >>>= 7;
        }
        out.put((byte) v);
    }
}
