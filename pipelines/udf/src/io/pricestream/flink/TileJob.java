package io.pricestream.flink;

import java.io.IOException;

import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.types.Row;

/**
 * The tiled views on the JVM: the valid events, keyed per entity group, into {@link TileAggregator}s;
 * their window-value rows unioned into one stream. {@code pipelines.feature_job} calls {@link #apply}
 * between the job's parts ({@link SourceJob} before, {@link SinkJob} after).
 */
public final class TileJob {

    /**
     * Columns of an output row, in order (the {@code features.v1} value, one row per entity and view).
     * {@code features} holds the view's features in catalogue order ({@code events.catalog.VIEWS}),
     * NaN for a feature without a value: an array, not a map, so that no feature name crosses the
     * network or is hashed per row.
     */
    public static final String[] OUTPUT_NAMES = {
        "hotel_id", "room_type", "stay_date", "view", "feature_time", "version", "publish_time", "features"};

    private TileJob() {}

    /** Type of an output row. */
    public static TypeInformation<Row> outputType() {
        return Types.ROW_NAMED(OUTPUT_NAMES, Types.STRING, Types.STRING, Types.STRING, Types.STRING, Types.LONG,
            Types.LONG, Types.LONG, PrimitiveArrayTypeInfo.DOUBLE_PRIMITIVE_ARRAY_TYPE_INFO);
    }

    /** The window-value rows of every tiled view of {@code specJson} from the rows of {@code valid}. */
    public static DataStream<Row> apply(DataStream<Row> valid, String specJson) throws IOException {
        TileSpec spec = TileSpec.parse(specJson);
        DataStream<Row> out = null;
        for (TileSpec.Group group : spec.groups) {
            DataStream<Row> values = valid
                .keyBy(new EntityKey(group.keyIdx))
                .transform("tiles: " + group.name, outputType(), new TileAggregator(spec, group))
                .uid("pricestream-tiles-" + group.name);
            out = out == null ? values : out.union(values);
        }
        if (out == null) {
            throw new IllegalArgumentException("tile spec: got no view groups, expected at least one");
        }
        return out;
    }

    /** {@code values} and the rows of {@code others} (same columns, by position) as one stream of {@link #outputType}. */
    public static DataStream<Row> union(DataStream<Row> values, DataStream<Row> others) {
        DataStream<Row> typed = others
            .map(row -> {
                Row out = new Row(OUTPUT_NAMES.length);
                for (int i = 0; i < OUTPUT_NAMES.length; i++) {
                    out.setField(i, row.getField(i));
                }
                return out;
            })
            .returns(outputType())
            .name("state rows")
            .uid("pricestream-state-rows");
        return values.union(typed);
    }

    /** The entity key of a row: its key columns joined by NUL (no id may hold a control character). */
    public static final class EntityKey implements KeySelector<Row, String> {
        private static final long serialVersionUID = 1L;
        private final int[] keyIdx;

        EntityKey(int[] keyIdx) {
            this.keyIdx = keyIdx;
        }

        @Override
        public String getKey(Row row) {
            if (keyIdx.length == 1) {
                return (String) row.getField(keyIdx[0]);
            }
            StringBuilder key = new StringBuilder();
            for (int k = 0; k < keyIdx.length; k++) {
                if (k > 0) {
                    key.append('\0');
                }
                key.append((String) row.getField(keyIdx[k]));
            }
            return key.toString();
        }
    }
}
