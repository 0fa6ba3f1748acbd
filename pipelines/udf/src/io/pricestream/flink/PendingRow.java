package io.pricestream.flink;

/** A view's row in {@link RedisFeatureSink} waiting for the next round trip: its values already in Feast's bytes. */
final class PendingRow {
    final RedisSinkSpec.ViewLayout layout;
    final long version;
    final long featureTime;
    final long publish;
    final byte[][] values;

    PendingRow(RedisSinkSpec.ViewLayout layout, long version, long featureTime, long publish, byte[][] values) {
        this.layout = layout;
        this.version = version;
        this.featureTime = featureTime;
        this.publish = publish;
        this.values = values;
    }
}
